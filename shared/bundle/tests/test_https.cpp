// HTTPS: the client verifies the hub's certificate and host name. A hub with
// a certificate the client does not trust is an error, never a silent fallback
// to the cache; the same hub is accepted once its CA is configured.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include "diode/bundle/client.h"
#include "fixture.h"

using namespace diode::bundle;
using namespace diode::bundle::testing;

namespace {
// A self-signed certificate for 127.0.0.1 (SAN IP), written as PEM files.
void make_cert(const fs::path& cert_path, const fs::path& key_path) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(key, nullptr);
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("diode test hub"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (const auto& [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"}, std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    ASSERT_NE(ext, nullptr);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  ASSERT_GT(X509_sign(x, key, EVP_sha256()), 0);
  FILE* f = std::fopen(cert_path.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
}

class TlsHub {
 public:
  TlsHub(const fs::path& root, const fs::path& cert, const fs::path& key) : srv_(cert.c_str(), key.c_str()) {
    srv_.Get(R"(/v1/models/([A-Za-z0-9._-]+)/index)", [root](const httplib::Request& req, httplib::Response& res) {
      res.set_content(slurp(root / req.matches[1].str() / "index.json"), "application/json");
    });
    srv_.Get(R"(/v1/models/([A-Za-z0-9._-]+)/([0-9]+)/([A-Za-z0-9._-]+))",
             [root](const httplib::Request& req, httplib::Response& res) {
               res.set_content(slurp(root / req.matches[1].str() / req.matches[2].str() / req.matches[3].str()),
                               "application/octet-stream");
             });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TlsHub() {
    srv_.stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::SSLServer srv_;
  int port_ = 0;
  std::thread thread_;
};
}  // namespace

TEST(Https, UntrustedCertificateRejectedTrustedAccepted) {
  World w;
  w.publish_now();
  make_cert(w.tmp / "cert.pem", w.tmp / "key.pem");
  TlsHub hub(w.registry, w.tmp / "cert.pem", w.tmp / "key.pem");
  const PullOptions o = pull_options(w, hub.url());
  ::unsetenv("DIODE_CA_BUNDLE");
  try {
    pull(o);
    FAIL() << "accepted a self-signed certificate";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("TLS verification"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(snapshot(w.cache).empty());
  ::setenv("DIODE_CA_BUNDLE", (w.tmp / "cert.pem").c_str(), 1);
  const PullResult r = pull(o);
  ::unsetenv("DIODE_CA_BUNDLE");
  EXPECT_FALSE(r.offline);
  EXPECT_EQ(r.version, 1u);
  // With a cached bundle, a TLS failure still does not fall back to the cache.
  EXPECT_THROW(pull(o), VerifyError);
}
