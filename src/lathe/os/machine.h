// The machine this process runs on: how many CPUs are online and how much
// memory it has, as sysconf(3) reports them. Thread-safe.
#pragma once

#include <cstdint>

namespace lathe::os {

// CPUs online now (_SC_NPROCESSORS_ONLN), at least 1. Not narrowed by this
// process's affinity mask or its cgroup.
int OnlineCpus();

// Physical memory in bytes (_SC_PHYS_PAGES times the page size); 0 when the
// system does not say.
uint64_t PhysicalMemoryBytes();

}  // namespace lathe::os
