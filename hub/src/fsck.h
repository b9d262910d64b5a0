// `diode hub fsck [--repair] --data DIR`: checks every shard of a hub store
// (reads it back, decodes it, checks its hash and its catalog row) and, with
// --repair, quarantines the shards that fail: their bytes and catalog rows go
// to DIR/quarantine/ (and the catalog's quarantined_shards table) and the hub
// stops serving them. Without --repair the store is opened read-only (safe
// next to a running hub); --repair needs the hub stopped. docs/testing.md,
// "Hostile client faults".
#pragma once

#include <ostream>
#include <string>

namespace diode::hub {

// Returns 0: every shard is sound (or every bad one was quarantined); 1: bad
// shards found and left in place (no --repair); 2: the store could not be
// checked. Writes one line per bad shard and a summary to `out`.
int fsck(const std::string& dir, bool repair, std::ostream& out);

}  // namespace diode::hub
