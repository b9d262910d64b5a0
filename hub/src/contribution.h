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

// Server side: checks the signature, the clock window, and every shard.
// Throws Rejection with code bad_signature | bad_request | invalid_shard | unknown_hardware.
VerifiedContribution verify_contribution(const std::map<std::string, std::string>& headers, std::string_view body,
                                         uint64_t now_ms, const Plausibility& rules = {},
                                         uint64_t max_skew_ms = 24ull * 3600 * 1000);

}  // namespace diode::hub
