//! The `token` of an upstream answer, read as the peers read it with `JSON.parse(text).token`: the body is one
//! JSON value; when it is an object, its last `token` member counts (JSON.parse keeps the last of duplicate
//! keys); anything but a string there is no token. Other members are skipped without being built, so a 1 KiB
//! answer costs one pass and one allocation (the token's). Where serde_json and JSON.parse still differ
//! (numbers beyond f64, nesting deeper than 128), the upstream service never goes.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

/// The token when `body` is UTF-8 JSON holding an object with a string `token`; `None` otherwise.
pub fn token_of(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<Answer>(body).ok()?.0
}

/// The answer's last `token` member, when it is a string.
struct Answer(Option<String>);

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AnswerVisitor)
    }
}

struct AnswerVisitor;

impl<'de> Visitor<'de> for AnswerVisitor {
    type Value = Answer;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answer, A::Error> {
        let mut token = None;
        while let Some(key) = map.next_key::<Key>()? {
            if key.0 {
                token = Some(map.next_value::<Member>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Answer(token.flatten()))
    }

    // Any other top-level value parses (JSON.parse accepts it) but has no token.
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Answer, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Answer(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<Answer, E> {
        Ok(Answer(None))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Answer, E> {
        Ok(Answer(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Answer, E> {
        Ok(Answer(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Answer, E> {
        Ok(Answer(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Answer, E> {
        Ok(Answer(None))
    }

    fn visit_unit<E>(self) -> Result<Answer, E> {
        Ok(Answer(None))
    }
}

/// Whether an object key is `token` (after unescaping, as JSON.parse compares keys).
struct Key(bool);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E>(self, key: &str) -> Result<Key, E> {
                Ok(Key(key == "token"))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A `token` member's value: the string, or `None` for any other JSON value (skipped whole).
struct Member(Option<String>);

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MemberVisitor;
        impl<'de> Visitor<'de> for MemberVisitor {
            type Value = Member;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E>(self, s: &str) -> Result<Member, E> {
                Ok(Member(Some(s.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Member, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Member(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Member, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Member(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Member, E> {
                Ok(Member(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Member, E> {
                Ok(Member(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Member, E> {
                Ok(Member(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Member, E> {
                Ok(Member(None))
            }
            fn visit_unit<E>(self) -> Result<Member, E> {
                Ok(Member(None))
            }
        }
        deserializer.deserialize_any(MemberVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::token_of;

    #[test]
    fn the_last_string_token_of_an_object() {
        let cases: [(&[u8], Option<&str>); 18] = [
            (br#"{"service":"upstream","token":"abc","padding":"xx"}"#, Some("abc")),
            (br#"{"token":"a\"b\\c\u00e9\n"}"#, Some("a\"b\\c\u{e9}\n")),
            (br#" {"tok\u0065n" : "escaped key"} "#, Some("escaped key")),
            (br#"{"token":"first","token":"last"}"#, Some("last")),
            (br#"{"token":"first","token":7}"#, None),
            (br#"{"token":7,"token":"last"}"#, Some("last")),
            (br#"{"token":{"token":"nested"}}"#, None),
            (br#"{"nested":{"token":"x"},"list":[1,{"a":null}]}"#, None),
            (br#"{"token":null}"#, None),
            (br#"{"token":["a"]}"#, None),
            (br#"{}"#, None),
            (br#"["token"]"#, None),
            (br#""token""#, None),
            (b"null", None),
            (b"", None),
            (b"not json", None),
            (br#"{"token":"a"} x"#, None),
            (b"\xef\xbb\xbf{\"token\":\"bom\"}", None),
        ];
        for (body, expected) in cases {
            assert_eq!(token_of(body).as_deref(), expected, "{:?}", String::from_utf8_lossy(body));
        }
        assert_eq!(token_of(b"{\"token\":\"\xff\"}"), None, "invalid UTF-8");
        assert_eq!(token_of(br#"{"token":"\ud800"}"#), None, "a lone surrogate");
    }
}
