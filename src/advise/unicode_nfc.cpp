#include "advise/unicode_nfc.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

namespace rapide::advise {

std::string to_nfc(const std::string& text) {
  // ASCII is its own NFC: the common case costs one scan.
  bool ascii = true;
  for (const unsigned char c : text) ascii &= c < 0x80;
  if (ascii) return text;

  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&status);
  if (U_FAILURE(status)) return text;
  // UTF-8 -> UTF-16 (ICU's normaliser works on UTF-16), normalise, and back.
  int32_t length16 = 0;
  u_strFromUTF8(nullptr, 0, &length16, text.data(), static_cast<int32_t>(text.size()), &status);
  if (status != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(status)) return text;
  status = U_ZERO_ERROR;
  std::vector<UChar> source(static_cast<size_t>(length16) + 1);
  u_strFromUTF8(source.data(), length16 + 1, nullptr, text.data(),
                static_cast<int32_t>(text.size()), &status);
  if (U_FAILURE(status)) return text;
  if (unorm2_isNormalized(nfc, source.data(), length16, &status) && U_SUCCESS(status)) {
    return text;
  }
  status = U_ZERO_ERROR;
  // Composition never lengthens UTF-16 by more than a small factor; ask ICU for the size.
  const int32_t needed = unorm2_normalize(nfc, source.data(), length16, nullptr, 0, &status);
  if (status != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(status)) return text;
  status = U_ZERO_ERROR;
  std::vector<UChar> normalized(static_cast<size_t>(needed) + 1);
  unorm2_normalize(nfc, source.data(), length16, normalized.data(), needed + 1, &status);
  if (U_FAILURE(status)) return text;
  int32_t length8 = 0;
  u_strToUTF8(nullptr, 0, &length8, normalized.data(), needed, &status);
  if (status != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(status)) return text;
  status = U_ZERO_ERROR;
  std::string out(static_cast<size_t>(length8), '\0');
  u_strToUTF8(out.data(), length8, nullptr, normalized.data(), needed, &status);
  if (U_FAILURE(status) && status != U_STRING_NOT_TERMINATED_WARNING) return text;
  return out;
}

}  // namespace rapide::advise
