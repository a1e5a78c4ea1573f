//! Escapes for text put into XML or HTML markup (SVG charts, report pages). Two strengths, kept apart because
//! the outputs they feed must stay byte-identical: element text needs only `&`, `<` and `>`; a value that
//! may also land in a quoted attribute needs the quotes too.

/// For element text: `&`, `<` and `>` escaped, everything else as it is (what an HTML writer does with body
/// text, quotes included).
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !push_markup_entity(c, &mut out) {
            out.push(c);
        }
    }
    out
}

/// For element text and attribute values alike: `&`, `<`, `>`, `"` and `'` escaped, tabs and line breaks made
/// spaces (an attribute would normalise them anyway), and the other control characters, which XML 1.0 cannot
/// carry at all, dropped.
pub fn escape_attribute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if push_markup_entity(c, &mut out) {
            continue;
        }
        match c {
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The entity of `&`, `<` or `>` pushed onto `out`; false (nothing pushed) for any other character.
fn push_markup_entity(c: char, out: &mut String) -> bool {
    let entity = match c {
        '&' => "&amp;",
        '<' => "&lt;",
        '>' => "&gt;",
        _ => return false,
    };
    out.push_str(entity);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_text_escapes_markup_and_leaves_quotes() {
        assert_eq!(escape_text(r#"a & <b> "c" 'd'"#), r#"a &amp; &lt;b&gt; "c" 'd'"#);
        assert_eq!(escape_text("plain\ttext é"), "plain\ttext é");
    }

    #[test]
    fn attribute_values_escape_quotes_too_and_lose_control_characters() {
        assert_eq!(escape_attribute(r#"a & <b> "c" 'd'"#), "a &amp; &lt;b&gt; &quot;c&quot; &apos;d&apos;");
        assert_eq!(escape_attribute("one\ttwo\nthree\u{7}é"), "one two threeé");
    }
}
