// The allocation probe (see tests/engine/alloc_probe.h) in the host test program as well.
#include "../engine/alloc_probe.cpp"
