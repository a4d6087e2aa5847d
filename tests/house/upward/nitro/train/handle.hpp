// the room above
#pragma once
#include "nitro/core/vocabulary.hpp"
