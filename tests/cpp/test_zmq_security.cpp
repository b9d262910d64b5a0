#include <gtest/gtest.h>

#include <sstream>

#include <filesystem>
#include <fstream>

#include "diode/zmq_security.h"

namespace diode::net {
namespace {

// A CURVE REQ/REP pair over loopback TCP: the allowlisted client gets its
// reply; an unknown key is refused by the ZAP handler and never reaches the server.
TEST(ZmqSecurity, AllowlistedClientAdmittedUnknownRefused) {
  zmq::context_t ctx;
  CurveKeyPair server = generate_curve_keypair(), good = generate_curve_keypair(), bad = generate_curve_keypair();
  ZapAuthenticator zap(ctx, {good.public_z85});

  zmq::socket_t rep(ctx, zmq::socket_type::rep);
  make_curve_server(rep, server);
  rep.bind("tcp://127.0.0.1:*");
  std::string endpoint = rep.get(zmq::sockopt::last_endpoint);

  auto ask = [&](const CurveKeyPair& me) -> bool {
    zmq::socket_t req(ctx, zmq::socket_type::req);
    make_curve_client(req, me, server.public_z85);
    req.set(zmq::sockopt::linger, 0);
    req.set(zmq::sockopt::rcvtimeo, 1500);
    req.connect(endpoint);
    req.send(zmq::buffer(std::string("ping")));
    zmq::pollitem_t items[] = {{static_cast<void*>(rep), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 1, std::chrono::milliseconds(1500)) > 0) {
      zmq::message_t m;
      (void)rep.recv(m);
      rep.send(zmq::buffer(std::string("pong")));
    }
    zmq::message_t reply;
    return req.recv(reply).has_value() && reply.to_string() == "pong";
  };

  EXPECT_TRUE(ask(good));
  EXPECT_FALSE(ask(bad));
  EXPECT_GE(zap.refused(), 1u);
  EXPECT_GE(zap.admitted(), 1u);
}

TEST(ZmqSecurity, KeyFilesAndAllowlistParsing) {
  auto dir = std::filesystem::temp_directory_path() / ("diode_zmq_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CurveKeyPair kp = generate_curve_keypair();
  save_curve_keypair((dir / "k.json").string(), kp);
  CurveKeyPair back = load_curve_keypair((dir / "k.json").string());
  EXPECT_EQ(back.public_z85, kp.public_z85);
  EXPECT_EQ(back.secret_z85, kp.secret_z85);
  EXPECT_EQ(std::filesystem::status(dir / "k.json").permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);

  std::ofstream(dir / "allow.txt") << "# agents\n" << kp.public_z85 << "  node-1 (rack 4)\n\n";
  EXPECT_EQ(load_allowlist((dir / "allow.txt").string()), std::set<std::string>{kp.public_z85});
  std::ofstream(dir / "bad.txt") << kp.public_z85 << "\nnot-a-key\n";
  try {
    load_allowlist((dir / "bad.txt").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt:2"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Every daemon's keygen: the key pair (0600) plus <file>.pub, the bare public
// key that the peers' key flags and allowlists take.
TEST(ZmqSecurity, KeygenWritesKeyPairAndPubFile) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("diode_keygen_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ostringstream note;
  const std::string key = (dir / "hub.key").string();
  std::string pub = create_curve_key_file(key, &note);
  EXPECT_TRUE(is_valid_z85_key(pub));
  EXPECT_EQ(public_key_file(key), key + ".pub");
  EXPECT_EQ(fs::status(key).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  std::ifstream in(key + ".pub");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, pub + "\n");
  EXPECT_NE(note.str().find(key + ".pub"), std::string::npos) << note.str();
  // The .pub file loads as a public-only key file, like {"public": ...}.
  CurveKeyPair from_pub = load_curve_keypair(key + ".pub");
  EXPECT_EQ(from_pub.public_z85, pub);
  EXPECT_TRUE(from_pub.secret_z85.empty());
  EXPECT_EQ(load_curve_keypair(key).public_z85, pub);
  EXPECT_EQ(load_allowlist(key + ".pub"), std::set<std::string>{pub});
  // '{' is a Z85 digit: a bare key that starts with one (1 key in 85) is still a bare key,
  // not a JSON file (CI once drew such a key here).
  const std::string brace = "{0000" + pub.substr(5);
  ASSERT_TRUE(is_valid_z85_key(brace));
  std::ofstream(dir / "brace.pub") << brace << "\n";
  EXPECT_EQ(load_curve_keypair((dir / "brace.pub").string()).public_z85, brace);
  std::ofstream(dir / "junk.pub") << "not a key\n";
  EXPECT_THROW(load_curve_keypair((dir / "junk.pub").string()), std::runtime_error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace diode::net
