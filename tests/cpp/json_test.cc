// The JSON writer on arbitrary bytes (src/core/json.cc): whatever a string
// holds (a foreign encoding, a truncated name, freed heap bytes), the output
// is valid JSON and valid UTF-8, well-formed characters kept, each ill-formed
// sequence one U+FFFD, as Python's bytes.decode("utf-8", "replace") does
// (Unicode's "maximal subpart" rule).
#include <gtest/gtest.h>

#include <string>

#include "core/json.h"

namespace threadburn {
namespace {

const std::string kFffd = "\\ufffd";

std::string q(const std::string& s) { return json_quote(s); }

TEST(JsonQuote, EscapesQuotesBackslashesAndEveryControlCharacter) {
  EXPECT_EQ(q("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(q("\n\r\t"), "\"\\n\\r\\t\"");
  EXPECT_EQ(q(std::string("\0\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(q(" ~"), "\" ~\"");  // the printable ASCII ends as is
}

TEST(JsonQuote, KeepsWellFormedMultibyteCharacters) {
  // 2, 3 and 4 bytes, and each range's edges: U+0080, U+07FF, U+0800,
  // U+D7FF and U+E000 (around the surrogates), U+FFFF, U+10000, U+10FFFF.
  for (const std::string s : {"caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x94\xa5", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80",
                              "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_EQ(q(s), "\"" + s + "\"") << s;
  }
}

TEST(JsonQuote, ReplacesEachIllFormedSequenceWithOneReplacementCharacter) {
  // Bytes that begin nothing: a lone continuation byte, C0/C1 (overlong
  // two-byte forms), F5..FF.
  EXPECT_EQ(q("a\x80z"), "\"a" + kFffd + "z\"");
  EXPECT_EQ(q("\xc0\xaf"), "\"" + kFffd + kFffd + "\"");
  EXPECT_EQ(q("\xf5\xff"), "\"" + kFffd + kFffd + "\"");
  // Overlong three- and four-byte forms, a surrogate, beyond U+10FFFF: the
  // second byte is out of its lead's range, so the lead alone is replaced
  // and the rest are lone continuation bytes.
  EXPECT_EQ(q("\xe0\x80\xaf"), "\"" + kFffd + kFffd + kFffd + "\"");
  EXPECT_EQ(q("\xed\xa0\x80"), "\"" + kFffd + kFffd + kFffd + "\"");
  EXPECT_EQ(q("\xf0\x8f\xbf\xbf"), "\"" + kFffd + kFffd + kFffd + kFffd + "\"");
  EXPECT_EQ(q("\xf4\x90\x80\x80"), "\"" + kFffd + kFffd + kFffd + kFffd + "\"");
  // A character cut short: its begun bytes are one replacement, and what
  // follows is kept.
  EXPECT_EQ(q("\xe2\x82z"), "\"" + kFffd + "z\"");
  EXPECT_EQ(q("\xf0\x9f\x94"), "\"" + kFffd + "\"");
  EXPECT_EQ(q("x\xf0\x9f\x94\xe2\x82\xac"), "\"x" + kFffd + "\xe2\x82\xac\"");
}

TEST(JsonQuote, FreedHeapBytesAsTheExitReportOnceReadThem) {
  // What a destroyed 16-byte std::string held when the summary was written
  // (glibc's free-list pointer over its first bytes): the field,
  // valid JSON and UTF-8 now, its tail kept.
  const std::string freed("\xda^\x93\x46\x00\x00\x00\x00ore_bf16", 16);
  EXPECT_EQ(q(freed), "\"" + kFffd + "^" + kFffd + "F\\u0000\\u0000\\u0000\\u0000ore_bf16\"");
}

TEST(JsonQuote, EveryByteValueAloneAndInPairs) {
  // Whatever the bytes, the output holds only printable ASCII and
  // well-formed UTF-8, never a raw control character.
  for (int a = 0; a < 256; ++a) {
    for (int b = -1; b < 256; ++b) {
      std::string s(1, static_cast<char>(a));
      if (b >= 0) s += static_cast<char>(b);
      const std::string out = q(s);
      for (std::size_t i = 0; i < out.size();) {
        const unsigned char c = static_cast<unsigned char>(out[i]);
        ASSERT_FALSE(c < 0x20 || c == 0x7f) << a << " " << b;
        if (c < 0x80) {
          ++i;
          continue;
        }
        // A multibyte character kept: it was in the input, well-formed.
        const std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        ASSERT_GE(c, 0xc2) << a << " " << b;
        ASSERT_LE(i + n, out.size()) << a << " " << b;
        ASSERT_NE(s.find(out.substr(i, n)), std::string::npos) << a << " " << b;
        i += n;
      }
    }
  }
}

TEST(JsonWriter, KeysAndValuesGoThroughTheQuoting) {
  JsonWriter j;
  j.begin_object().field("k\xff", std::string("v\x01\xc3\xa9")).end_object();
  EXPECT_EQ(j.str(), "{\"k" + kFffd + "\":\"v\\u0001\xc3\xa9\"}");
}

}  // namespace
}  // namespace threadburn
