// a core header reaching up into train/: the room checker must refuse it
#pragma once
#include "nitro/train/handle.hpp"
