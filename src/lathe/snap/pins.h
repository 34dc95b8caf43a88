// Pins: a snapshot that something outside the store refers to — a model
// version (the daemon's registry) — and that must stay while it does.
//
// A pin is a file <store>/pins/<id>/<holder> (holder percent-encoded), so
// every process that opens the store sees it, `lathe snap prune` run by hand
// as much as the daemon. Prune skips a pinned snapshot (it is kept), Forget
// refuses it (FailedPrecondition snap.pinned, naming the holders); gc keeps
// its chunks because the snapshot stays.
//
// Pinning and the removals take <store>/pins.lock exclusively around their
// check-then-act (the pin against the manifest's existence, a removal
// against the pins, up to the point the manifest is marked pruned), so a
// pin and a prune running at once in two processes never both succeed.
#pragma once

#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/file_lock.h"
#include "lathe/snap/layout.h"

namespace lathe::snap {

// A holder's text: 1..200 bytes of printable ASCII. InvalidArgument otherwise.
Status CheckPinHolder(const std::string& holder);

// The lock that Pin and the removals take (exclusive).
Result<os::FileLock> LockPins(const StoreLayout& l);

// The holders of snapshot `id`'s pins, sorted; empty when none. The caller
// holds LockPins when it acts on the answer.
Result<std::vector<std::string>> ReadPins(const StoreLayout& l, const std::string& id);

// Writes / removes one pin (durably). The caller holds LockPins. Unpinning a
// pin that is not there is OK.
Status WritePin(const StoreLayout& l, const std::string& id, const std::string& holder);
Status RemovePin(const StoreLayout& l, const std::string& id, const std::string& holder);

// FailedPrecondition (snap.pinned) naming `id` and its holders.
Status PinnedError(const std::string& id, const std::vector<std::string>& holders);

}  // namespace lathe::snap
