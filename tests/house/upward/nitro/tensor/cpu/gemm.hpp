// the CPU backend's product
#pragma once
