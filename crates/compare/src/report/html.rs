//! The report as one self-contained HTML page, derived from its Markdown (the single source of the content):
//! pulldown-cmark renders the Markdown, every image whose target is one of the charts in hand becomes that
//! chart's `<svg>` inline, and a small stylesheet is embedded. Nothing is linked or loaded: the page opens
//! from disk in any browser, without a server, network or script.

use pulldown_cmark::{Alignment, CowStr, Event, Options, Parser, Tag, TagEnd, html};
use textfmt::xml::escape_text;

const STYLE: &str = r#"body { margin: 0; background: #fff; color: #222;
  font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; line-height: 1.45; }
main { max-width: 1280px; margin: 0 auto; padding: 1rem 2rem 3rem; }
h1 { font-size: 1.6rem; }
h2 { margin-top: 2.2rem; padding-bottom: .2rem; border-bottom: 1px solid #ddd; }
table { display: block; max-width: 100%; overflow-x: auto; border-collapse: collapse; margin: 1rem 0;
  font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .3rem .55rem; vertical-align: top; }
th { background: #f3f3f3; }
td { font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafafa; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .9em; background: #f3f3f3;
  padding: 0 .2em; border-radius: 3px; }
svg { display: block; max-width: 100%; height: auto; margin: 1rem 0; }
"#;

/// The whole HTML document: `title` (text, escaped here) and `markdown` rendered, each image whose target
/// is a file name in `svgs` (file name, SVG text) replaced by that SVG inline.
pub fn page(title: &str, markdown: &str, svgs: &[(String, String)]) -> String {
    let events = inline_charts(Parser::new_ext(markdown, Options::ENABLE_TABLES), svgs);
    let mut body = String::new();
    html::push_html(&mut body, align_numbers(events).into_iter());
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n\
         <style>\n{STYLE}</style>\n</head>\n<body>\n<main>\n{body}</main>\n</body>\n</html>\n",
        escape_text(title)
    )
}

/// An SVG document as markup for inside HTML: without its XML declaration.
fn inline_svg(svg: &str) -> &str {
    let svg = svg.trim_start();
    match svg.strip_prefix("<?xml").and_then(|rest| rest.split_once("?>")) {
        Some((_, rest)) => rest.trim(),
        None => svg.trim_end(),
    }
}

/// The events with each chart image replaced by its SVG markup. Raw HTML in the Markdown (from text in the
/// records, say a void reason quoting a response) is shown as text, never passed through as markup; an image
/// with no chart in hand becomes a note, so the page links no file.
fn inline_charts<'a>(events: impl Iterator<Item = Event<'a>>, svgs: &[(String, String)]) -> Vec<Event<'a>> {
    let mut out = Vec::new();
    // Inside an image (its alt text): how deep, since alt text may hold images too.
    let mut skipping = 0usize;
    for event in events {
        match event {
            Event::Start(Tag::Image { dest_url, .. }) => {
                if skipping == 0 {
                    out.push(match svgs.iter().find(|(name, _)| name.as_str() == &*dest_url) {
                        Some((_, svg)) => Event::InlineHtml(CowStr::from(inline_svg(svg).to_string())),
                        None => Event::Text(CowStr::from(format!("(chart {dest_url} not written)"))),
                    });
                }
                skipping += 1;
            }
            Event::End(TagEnd::Image) => skipping = skipping.saturating_sub(1),
            _ if skipping > 0 => {}
            Event::Html(raw) | Event::InlineHtml(raw) => out.push(Event::Text(raw)),
            other => out.push(other),
        }
    }
    out
}

/// Tables with their figures right-aligned: a column whose body cells mostly start with a digit (a dash,
/// "no figure", does not count either way) is aligned right unless the Markdown aligned it already.
fn align_numbers(mut events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let mut i = 0;
    while i < events.len() {
        let Event::Start(Tag::Table(_)) = &events[i] else {
            i += 1;
            continue;
        };
        let start = i;
        // Per column: (cells starting with a digit, other cells with text).
        let mut columns: Vec<(usize, usize)> = Vec::new();
        let (mut in_head, mut column, mut cell) = (false, 0usize, None::<String>);
        i += 1;
        while i < events.len() {
            match &events[i] {
                Event::End(TagEnd::Table) => break,
                Event::Start(Tag::TableHead) => in_head = true,
                Event::End(TagEnd::TableHead) => in_head = false,
                Event::Start(Tag::TableRow) => column = 0,
                Event::Start(Tag::TableCell) if !in_head => cell = Some(String::new()),
                Event::Text(t) | Event::Code(t) => {
                    if let Some(c) = cell.as_mut() {
                        c.push_str(t);
                    }
                }
                Event::End(TagEnd::TableCell) => {
                    if let Some(text) = cell.take() {
                        let text = text.trim();
                        if columns.len() <= column {
                            columns.resize(column + 1, (0, 0));
                        }
                        if text.starts_with(|c: char| c.is_ascii_digit()) {
                            columns[column].0 += 1;
                        } else if !text.is_empty() && text != "—" {
                            columns[column].1 += 1;
                        }
                    }
                    column += 1;
                }
                _ => {}
            }
            i += 1;
        }
        if let Event::Start(Tag::Table(alignments)) = &mut events[start] {
            for (a, (digits, other)) in alignments.iter_mut().zip(columns) {
                if *a == Alignment::None && digits > 0 && digits >= other {
                    *a = Alignment::Right;
                }
            }
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" \
                       width=\"10\" height=\"10\"><text>a &amp; b</text></svg>\n";

    #[test]
    fn charts_inline_tables_and_escaping() {
        let md = "# compare: x\n\n- run `r<1>`\n\n![x](r-x.svg)\n\n![gone](r-gone.svg)\n\n\
                  | runtime | version | req/s |\n|---|---|---|\n| rust | hello-rs 0.1.0 | 1,000 (900–1,100) |\n\
                  | node | v22 | **VOID**: <script>alert(1)</script> |\n| bun | 1.2.3 | 800 |\n";
        let page = page("a <b> & c", md, &[("r-x.svg".into(), SVG.into())]);
        assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<meta charset=\"utf-8\">"), "{page}");
        assert!(page.contains("<title>a &lt;b&gt; &amp; c</title>"), "{page}");
        assert!(page.contains("<p><svg xmlns=\"http://www.w3.org/2000/svg\""), "{page}");
        assert!(page.contains("<text>a &amp; b</text></svg></p>"), "{page}");
        assert!(!page.contains("<?xml") && !page.contains("<img"), "{page}");
        assert!(page.contains("(chart r-gone.svg not written)"), "{page}");
        assert!(page.contains("<code>r&lt;1&gt;</code>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !page.contains("<script"), "{page}");
        // The version column is mostly text, the req/s column figures.
        assert!(page.contains("<th>version</th><th style=\"text-align: right\">req/s</th>"), "{page}");
        assert!(page.contains("<td>hello-rs 0.1.0</td><td style=\"text-align: right\">1,000"), "{page}");
    }
}
