// llama.cpp's GBNF grammar syntax -> Grammar.
//
//   root  ::= item ("," ws item)*     # rules: name ::= alternatives; `root` is the start
//   item  ::= [a-z]+ | "lit\n" | .    # char classes (with ^ and ranges), literals, any char
//   ws    ::= [ \t]{0,4}              # postfix * + ? {m} {m,} {m,n}; ( ) groups
//
// Literals and classes are Unicode scalar values (escapes \n \r \t \\ \" \[ \] \xHH \uHHHH
// \UHHHHHHHH); they are lowered to UTF-8 byte sequences, so the grammar runs on bytes and
// accepts valid UTF-8 only. An escape beyond U+10FFFF or naming a surrogate, and grammar text
// that is not UTF-8, are errors; a class range spanning the surrogates skips them.
// A rule's alternatives continue over newlines only inside parentheses or after `|`.
// Throws Error(kInvalidArgument) with the line of the first syntax error, and for grammars
// too large to hold: parentheses nested deeper than 256, repetitions unrolling into more than
// 2^18 elements (a grammar may come from an untrusted request).
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace rapide::grammar {

Grammar parse_gbnf(std::string_view text);

}  // namespace rapide::grammar
