#include "lathe/exec/backend.h"

namespace lathe::exec {

Json CapabilitiesToJson(const Capabilities& c) {
  return Json{{"places_runs", c.places_runs},
              {"memory_limit", c.memory_limit},
              {"cpu_limit", c.cpu_limit},
              {"private_shm", c.private_shm},
              {"images", c.images},
              {"ports", c.ports},
              {"multi_node", c.multi_node},
              {"isolated_network", c.isolated_network},
              {"note", c.note}};
}

}  // namespace lathe::exec
