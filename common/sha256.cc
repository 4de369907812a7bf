#include "common/sha256.h"

#include <openssl/evp.h>

#include "common/check.h"

namespace manta {

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK(EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) == 1) << "SHA-256 failed";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace manta
