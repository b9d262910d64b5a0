// Community contributions: a dataset recorded outside the fleet, uploaded over
// HTTP and signed with the contributor's Ed25519 key (diode::bundle crypto).
//
// The body is a "dataset" message (gzip allowed). The signature covers a
// domain-separated statement binding the contributor's name, the signing time
// and the SHA-256 of the exact body bytes (docs/api.md#contributions):
//   "diode-contribution/1\nname:<name>\ntime_ms:<ms>\nsha256:<hex>\n"
// Headers: X-Diode-Contributor-Key (64 hex), X-Diode-Contributor-Name,
// X-Diode-Timestamp-Ms, X-Diode-Signature (128 hex).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "store.h"
#include "validate.h"

namespace diode::hub {

inline constexpr const char* kHdrKey = "X-Diode-Contributor-Key";
inline constexpr const char* kHdrName = "X-Diode-Contributor-Name";
inline constexpr const char* kHdrTime = "X-Diode-Timestamp-Ms";
inline constexpr const char* kHdrSignature = "X-Diode-Signature";

std::string contribution_statement(const std::string& name, uint64_t time_ms, const std::string& body_sha256_hex);
// A contributor name: a display name of 1..64 characters of [A-Za-z0-9 ._@+'-],
// optionally followed by " <local@domain>" (the form git uses, e.g.
// "Jane Doe <jane@example.org>"); at most kMaxContributorName bytes in all.
// Printable ASCII only: it travels in an HTTP header and in the signed
// statement, whose lines it must not break.
inline constexpr size_t kMaxContributorName = 128;
inline constexpr const char* kContributorNameRule =
    "a display name of 1..64 characters of [A-Za-z0-9 ._@+'-], optionally followed by \" <local@domain>\"; at most "
    "128 characters";
bool valid_contributor_name(std::string_view name);

// Client side: the headers for uploading `body`, signed with the PEM key.
std::map<std::string, std::string> sign_contribution(const std::string& private_key_pem, const std::string& name,
                                                     std::string_view body, uint64_t time_ms);

struct VerifiedContribution {
  ContributionInfo info;
  std::vector<IncomingShard> shards;
  uint64_t records = 0;
};

// Shard identity of community data. A shard's wire id is chosen by whoever
// wrote it and is not unique across files or contributors: the collector
// writes every part of one resumed seed under the same id (the committed
// datasets/ hold up to ten parts of "dataset-mix2/2026112512"). So the hub
// stores a community shard under a content-addressed catalog id,
// "<wire id>@<sha256 hex>": two different shards never collide, the same
// shard uploaded again (in any file, by anyone) is a duplicate, and no
// contributor can take a fleet shard's id. The wire bytes are stored
// unchanged; exports carry the shards' own ids.
std::string community_catalog_id(const std::string& wire_id, const Sha256Digest& sha256);

// Shards the store already holds under their wire id with the same content
// (a fleet shard, or a community shard stored before catalog ids were
// content-addressed) keep that id, so the store counts them as duplicates
// and nobody is credited for re-packed data. Call after verify_contribution.
void match_stored_shards(const Store& store, VerifiedContribution& v);

// GET /v1/contributors: every contributor with credited data (of one hardware
// key, or of all when hardware_key is empty), most recent first, each with
// its key fingerprint, name, contributions, shards, records and the time of
// its last contribution; at most kMaxContributorsListed (then "truncated").
inline constexpr size_t kMaxContributorsListed = 1000;
nlohmann::json contributors_summary(const Store& store, const std::string& hardware_key);
// The same summary from Store::contributions() rows (as in the stats'
// "contributions"), for clients that already hold them.
nlohmann::json contributors_from_rows(const nlohmann::json& rows);
// "ed25519:" and the first 16 hex digits of a contributor key.
std::string key_fingerprint(const std::string& public_key_hex);

// Server side: checks the signature, the clock window, and every shard.
// Throws Rejection with code bad_signature | bad_request | invalid_shard | unknown_hardware.
VerifiedContribution verify_contribution(const std::map<std::string, std::string>& headers, std::string_view body,
                                         uint64_t now_ms, const Plausibility& rules = {},
                                         uint64_t max_skew_ms = 24ull * 3600 * 1000);

}  // namespace diode::hub
