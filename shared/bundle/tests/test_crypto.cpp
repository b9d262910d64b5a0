#include <gtest/gtest.h>

#include "diode/bundle/crypto.h"

using namespace diode::bundle;

TEST(Crypto, SignVerifyRoundTrip) {
  const PrivateKey k = PrivateKey::generate();
  const std::string sig = k.sign("message");
  EXPECT_EQ(sig.size(), 64u);
  EXPECT_TRUE(verify_signature(k.public_key(), "message", sig));
  EXPECT_FALSE(verify_signature(k.public_key(), "messagf", sig));
  EXPECT_FALSE(verify_signature(PrivateKey::generate().public_key(), "message", sig));
  std::string flipped = sig;
  flipped[10] ^= 1;
  EXPECT_FALSE(verify_signature(k.public_key(), "message", flipped));
  EXPECT_FALSE(verify_signature(k.public_key(), "message", sig.substr(0, 63)));
}

TEST(Crypto, PemRoundTripKeepsTheKey) {
  const PrivateKey k = PrivateKey::generate();
  const PrivateKey back = PrivateKey::from_pem(k.to_pem());
  EXPECT_EQ(back.public_key().raw, k.public_key().raw);
  EXPECT_TRUE(verify_signature(k.public_key(), "x", back.sign("x")));
  EXPECT_THROW(PrivateKey::from_pem("not a pem"), std::runtime_error);
}

TEST(Crypto, Ed25519TestVector) {
  // RFC 8032 section 7.1, test 1: the empty message.
  const PublicKey pk = PublicKey::from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  const std::string sig_hex =
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
  std::string sig;
  for (size_t i = 0; i < sig_hex.size(); i += 2) sig += static_cast<char>(std::stoi(sig_hex.substr(i, 2), nullptr, 16));
  EXPECT_TRUE(verify_signature(pk, "", sig));
  EXPECT_FALSE(verify_signature(pk, "x", sig));
}

TEST(Crypto, KeyIdIsTheHashOfTheKey) {
  const PublicKey pk = PrivateKey::generate().public_key();
  EXPECT_EQ(pk.keyid(), sha256_hex(pk.raw));
  EXPECT_EQ(PublicKey::from_hex(pk.hex()).raw, pk.raw);
  EXPECT_THROW(PublicKey::from_hex("abcd"), VerifyError);
  EXPECT_THROW(PublicKey::from_hex(std::string(64, 'z')), VerifyError);
}
