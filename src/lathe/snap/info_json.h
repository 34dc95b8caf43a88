// JSON rows for `lathe snap ls` and the daemon's /api/v1/snapshots: one
// shape whether the store is opened directly or through the daemon.
#pragma once

#include "lathe/common/json.h"
#include "lathe/snap/store.h"

namespace lathe::snap {

// {id, time_ms, source, parent, tags, files, bytes, new_bytes,
//  status: complete|incomplete, reason}
Json InfoToJson(const SnapshotInfo& i);

// {id: null, time_ms, source, tags, status: skipped, reason (English),
//  msg_id, args: {k: v}} — msg_id and args let a client say it in its language.
Json SkipToJson(const SkipRecord& s);

// The msg_id and args of a SkipToJson row, back as a catalog reference.
MsgArgs SkipArgs(const Json& row);

}  // namespace lathe::snap
