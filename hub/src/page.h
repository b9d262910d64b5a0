// The hub's human-readable page (GET /) and the JSON it is drawn from
// (GET /v1/summary). Read-only, same origin only: the page is one HTML file
// (hub/assets/index.html, embedded at build time) whose script fetches
// /v1/summary and draws tables and inline SVG charts; it loads nothing from
// anywhere else (its Content-Security-Policy forbids it).
//
// /v1/summary, per hardware key the hub knows (stored shards or a model in
// its registry):
//   * the dataset: shards, records, problems, ops, dtypes, coverage of M/N/K,
//     records by status, contributors (name, runner, sources, counts and a
//     fingerprint of the public key, never the key) and community uploads
//     (`diode contribute`: contributor name, shards, records, key fingerprint);
//   * the sweeps the stored shards belong to (sweep_id: the manifest's name
//     unless the manifest sets one): shards, records, problems, first and
//     last shard. How many shards a manifest has in all, and which are
//     pending, leased or failed, only the coordinator knows (`diode status`,
//     diode_coordinator_shards); the page says so;
//   * every model version in the registry, from each version's signed
//     bundle.json (created, expires, dataset size, training, metrics: the
//     overall regret of the model's top-1/5/10 and of cuBLAS and Inductor's
//     DEFAULT list on the test split) and the key ids that signed it;
//   * the automatic retraining state (<data>/retrain/state.json), if any.
// Dataset statistics are cached per hardware key until its shard or record
// count changes, and recomputed at most every 30 s while it keeps changing.
#pragma once

#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "store.h"

namespace diode::hub {

// Decides whether a read request may be served: true to serve it; false after
// writing the refusal (401) into the response.
using ReadGate = std::function<bool(const httplib::Request&, httplib::Response&)>;

// Registers GET / and GET /v1/summary on `svr`; /v1/summary is served only when
// `admit` lets the request through. `store` must outlive it.
void register_page_routes(httplib::Server& svr, Store& store, ReadGate admit);

// The summary served at /v1/summary (exposed for tests).
nlohmann::json page_summary(Store& store);

// The embedded page (hub/assets/index.html).
extern const char* const kPageHtml;

}  // namespace diode::hub
