#include "lathe/common/secret_box.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

namespace lathe {
namespace {

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

CipherCtx NewCtx() { return CipherCtx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free); }

unsigned char* U(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }
const unsigned char* U(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

std::string NewSecretKey() {
  std::string key(kSecretKeyBytes, '\0');
  if (RAND_bytes(U(key), static_cast<int>(key.size())) != 1) return "";
  return key;
}

Result<SecretBox> SecretBox::FromKey(std::string key) {
  if (key.size() != kSecretKeyBytes) {
    return Status::InvalidArgument("a secret key has " + std::to_string(kSecretKeyBytes) +
                                   " bytes, got " + std::to_string(key.size()));
  }
  return SecretBox(std::move(key));
}

Result<std::string> SecretBox::Seal(std::string_view plaintext, std::string_view aad) const {
  std::string out(kSecretNonceBytes + plaintext.size() + kSecretTagBytes, '\0');
  if (RAND_bytes(U(out), kSecretNonceBytes) != 1) return Status::Internal("no random nonce");
  CipherCtx ctx = NewCtx();
  int n = 0;
  unsigned char* ct = U(out) + kSecretNonceBytes;
  bool ok =
      ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kSecretNonceBytes, nullptr) &&
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, U(std::string_view(key_)), U(out)) &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, U(aad), static_cast<int>(aad.size())) &&
      EVP_EncryptUpdate(ctx.get(), ct, &n, U(plaintext), static_cast<int>(plaintext.size())) &&
      EVP_EncryptFinal_ex(ctx.get(), ct + n, &n) &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kSecretTagBytes, ct + plaintext.size());
  if (!ok) return Status::Internal("AES-256-GCM encryption failed");
  return out;
}

Result<std::string> SecretBox::Open(std::string_view sealed, std::string_view aad) const {
  if (sealed.size() < kSecretNonceBytes + kSecretTagBytes) {
    return Status::Internal("a sealed value is too short");
  }
  const size_t len = sealed.size() - kSecretNonceBytes - kSecretTagBytes;
  std::string out(len, '\0');
  std::string tag(sealed.substr(kSecretNonceBytes + len));
  CipherCtx ctx = NewCtx();
  int n = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kSecretNonceBytes, nullptr) &&
            EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, U(std::string_view(key_)), U(sealed)) &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &n, U(aad), static_cast<int>(aad.size())) &&
            EVP_DecryptUpdate(ctx.get(), U(out), &n, U(sealed) + kSecretNonceBytes,
                              static_cast<int>(len)) &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kSecretTagBytes, U(tag)) &&
            EVP_DecryptFinal_ex(ctx.get(), U(out) + n, &n) > 0;
  if (!ok) return Status::Internal("a sealed value does not authenticate (another key?)");
  return out;
}

}  // namespace lathe
