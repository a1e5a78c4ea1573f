//! A small XML checker the chart tests share, so every chart is tested as a document a browser accepts.

/// A small well-formedness check: one root `svg` element with the SVG namespace, balanced tags, quoted
/// attributes without `<`, no duplicate attributes, and every `&` starting a known entity.
pub(super) fn well_formed(doc: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut rest = doc;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            check_text(rest)?;
            break;
        };
        check_text(&rest[..lt])?;
        if stack.is_empty() && !rest[..lt].trim().is_empty() {
            return Err(format!("text outside the root: {:?}", &rest[..lt]));
        }
        rest = &rest[lt..];
        if let Some(body) = rest.strip_prefix("<?") {
            let end = body.find("?>").ok_or("unterminated <?")?;
            rest = &body[end + 2..];
            continue;
        }
        if let Some(body) = rest.strip_prefix("<!--") {
            let end = body.find("-->").ok_or("unterminated comment")?;
            rest = &body[end + 3..];
            continue;
        }
        let gt = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().ok_or_else(|| format!("</{name}> closes nothing"))?;
            if open != name.trim() {
                return Err(format!("<{open}> closed by </{name}>"));
            }
            continue;
        }
        let (tag, self_closing) = match tag.strip_suffix('/') {
            Some(t) => (t, true),
            None => (tag, false),
        };
        let name_end = tag.find(|c: char| c.is_whitespace()).unwrap_or(tag.len());
        let name = &tag[..name_end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') {
            return Err(format!("bad tag name {name:?}"));
        }
        let attrs = parse_attrs(&tag[name_end..])?;
        if stack.is_empty() {
            roots += 1;
            if name != "svg" || !attrs.iter().any(|(k, v)| k == "xmlns" && v == "http://www.w3.org/2000/svg") {
                return Err(format!("root is <{name}> without the SVG namespace"));
            }
        }
        if !self_closing {
            stack.push(name.to_string());
        }
    }
    if !stack.is_empty() {
        return Err(format!("unclosed: {stack:?}"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(())
}

fn parse_attrs(mut s: &str) -> Result<Vec<(String, String)>, String> {
    let mut attrs: Vec<(String, String)> = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Ok(attrs);
        }
        let eq = s.find('=').ok_or_else(|| format!("attribute without value: {s:?}"))?;
        let name = s[..eq].trim().to_string();
        let value_part = s[eq + 1..].strip_prefix('"').ok_or_else(|| format!("unquoted attribute {name}"))?;
        let close = value_part.find('"').ok_or_else(|| format!("unterminated attribute {name}"))?;
        let value = &value_part[..close];
        if value.contains('<') {
            return Err(format!("'<' in attribute {name}"));
        }
        check_text(value)?;
        if attrs.iter().any(|(k, _)| *k == name) {
            return Err(format!("duplicate attribute {name}"));
        }
        attrs.push((name, value.to_string()));
        s = &value_part[close + 1..];
    }
}

fn check_text(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        rest = &rest[amp..];
        let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| rest.starts_with(e));
        if !ok {
            return Err(format!("bare & in {text:?}"));
        }
        rest = &rest[1..];
    }
    if text.contains('>') {
        return Err(format!("unescaped > in {text:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_catches_broken_documents() {
        let ok = r#"<svg xmlns="http://www.w3.org/2000/svg"><text>a &amp; b</text></svg>"#;
        assert!(well_formed(ok).is_ok());
        for bad in [
            r#"<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>"#,
            r#"<svg xmlns="http://www.w3.org/2000/svg"><g></svg>"#,
            r#"<svg><text/></svg>"#,
            r#"<svg xmlns="http://www.w3.org/2000/svg" a="1" a="2"/>"#,
            r#"<svg xmlns="http://www.w3.org/2000/svg"/><svg xmlns="http://www.w3.org/2000/svg"/>"#,
        ] {
            assert!(well_formed(bad).is_err(), "{bad}");
        }
    }
}
