//! JavaScript's `encodeURI` and `decodeURI` on UTF-16 code units, the escaping of diff-match-patch's patch text
//! (patch_toText writes each diff line through `encodeURI`, patch_fromText reads it back with `decodeURI`).
//! Node's rules exactly, throwing included (`None` here), so scribe-rs writes and reads the original's patch text
//! byte for byte.

/// JS `encodeURI`: keeps `A-Z a-z 0-9 ; , / ? : @ & = + $ - _ . ! ~ * ' ( ) #`, writes everything else as
/// upper-case `%XX` UTF-8 bytes. `None` on a lone surrogate (JS throws URIError).
pub(crate) fn encode_uri(units: &[u16]) -> Option<String> {
    const KEEP: &[u8] = b";,/?:@&=+$-_.!~*'()#";
    let mut out = String::with_capacity(units.len());
    for c in char::decode_utf16(units.iter().copied()) {
        let c = c.ok()?;
        if c.is_ascii_alphanumeric() || u8::try_from(c).is_ok_and(|b| KEEP.contains(&b)) {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push('%');
                out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
                out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
            }
        }
    }
    Some(out)
}

/// JS `decodeURI`, to UTF-16: `%XX` sequences of UTF-8 are decoded, except escapes of the reserved set
/// `; / ? : @ & = + $ , #`, which stay as written. `None` where JS throws URIError.
pub(crate) fn decode_uri(s: &str) -> Option<Vec<u16>> {
    const RESERVED: &[u8] = b";/?:@&=+$,#";
    fn hex_byte(b: &[u8], at: usize) -> Option<u8> {
        if *b.get(at)? != b'%' {
            return None;
        }
        let digits = std::str::from_utf8(b.get(at + 1..at + 3)?).ok()?;
        u8::from_str_radix(digits, 16).ok().filter(|_| digits.bytes().all(|d| d.is_ascii_hexdigit()))
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            let c = s.get(i..)?.chars().next()?;
            let mut buf = [0; 2];
            out.extend_from_slice(c.encode_utf16(&mut buf));
            i += c.len_utf8();
            continue;
        }
        let first = hex_byte(bytes, i)?;
        if first < 0x80 {
            if RESERVED.contains(&first) {
                out.extend(s.get(i..i + 3)?.encode_utf16());
            } else {
                out.push(u16::from(first));
            }
            i += 3;
            continue;
        }
        let n = match first {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return None,
        };
        let mut seq = vec![first];
        for k in 1..n {
            seq.push(hex_byte(bytes, i + 3 * k)?);
        }
        // from_utf8 rejects what decodeURI rejects: bad continuation bytes, overlong forms, surrogates, > U+10FFFF.
        let c = std::str::from_utf8(&seq).ok()?.chars().next()?;
        let mut buf = [0; 2];
        out.extend_from_slice(c.encode_utf16(&mut buf));
        i += 3 * n;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn history_uri_codec_matches_js() {
        let all: String = (1u32..0x80).filter_map(char::from_u32).collect();
        // encodeURI(all chars 1..127) in Node 20
        let js = "%01%02%03%04%05%06%07%08%09%0A%0B%0C%0D%0E%0F%10%11%12%13%14%15%16%17%18%19%1A%1B%1C%1D%1E%1F\
                  %20!%22#$%25&'()*+,-./0123456789:;%3C=%3E?@ABCDEFGHIJKLMNOPQRSTUVWXYZ%5B%5C%5D%5E_%60\
                  abcdefghijklmnopqrstuvwxyz%7B%7C%7D~%7F";
        let units: Vec<u16> = all.encode_utf16().collect();
        assert_eq!(encode_uri(&units).unwrap(), js);
        assert_eq!(decode_uri(js).unwrap(), units);
        assert_eq!(encode_uri(&"é😀".encode_utf16().collect::<Vec<_>>()).unwrap(), "%C3%A9%F0%9F%98%80");
        assert_eq!(encode_uri(&[0xD83D]), None);
        // decodeURI keeps escapes of reserved characters and throws on malformed UTF-8.
        assert_eq!(decode_uri("%23%2F%3f%41").unwrap(), "%23%2F%3fA".encode_utf16().collect::<Vec<_>>());
        for bad in ["%", "%4", "%zz", "%C3", "%C3%28", "%ED%A0%BD", "%C0%AF", "%F8%88%80%80%80"] {
            assert_eq!(decode_uri(bad), None, "{bad}");
        }
    }
}
