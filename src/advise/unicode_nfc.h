// Unicode canonical composition (NFC) of UTF-8 text, through ICU.
//
// The prompt lint uses it because the same visible text can arrive as different bytes: "é"
// as U+00E9 from one client and as "e" + U+0301 from another (macOS file names, some
// editors and copy-paste paths decompose). Byte-level block hashes then differ, so the
// prefix cache misses although the prompts look identical. NFC is the form the web and most
// text already use, so normalising to it changes the fewest requests.
#pragma once

#include <string>

namespace rapide::advise {

// `text` in NFC. Invalid UTF-8 is returned unchanged (nothing to normalise reliably; the
// lint reports other differences for it).
std::string to_nfc(const std::string& text);

}  // namespace rapide::advise
