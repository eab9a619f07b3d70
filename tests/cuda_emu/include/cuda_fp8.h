// The emulator has no 8-bit float types; nccl.h includes this header and uses none of them.
#pragma once
