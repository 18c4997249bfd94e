// core/utf8.h: strict UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF) for everything that checks untrusted text: the
// tokenizer, the BPE trainer, the tool-call parser, the knowledge base.
// Defines utf8_char_len, utf8_first_invalid, utf8_encode.
#ifndef FIMI_CORE_UTF8_H
#define FIMI_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

// Length (1..4) of the valid UTF-8 character at s[0..n) with its code point
// in *cp, or 0 if the bytes there are not one valid character.
size_t utf8_char_len(const unsigned char *s, size_t n, uint32_t *cp);
// Offset of the first byte that does not start a valid character, or n.
size_t utf8_first_invalid(const char *s, size_t n);
// Writes cp (<= 0x10FFFF) as UTF-8 into out; returns the byte count.
size_t utf8_encode(uint32_t cp, char out[4]);

#endif
