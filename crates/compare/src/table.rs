//! Markdown tables, built one way: a header, a rule, then rows, every cell escaped once (`|` and line breaks,
//! so free text such as a void reason with a server's log tail stays in its cell). Every table compare writes
//! (the report's, calibrate's, images') goes through here.

/// A table being written.
#[derive(Debug)]
pub struct Table {
    text: String,
}

impl Table {
    /// A table with these column headers.
    pub fn new<S: AsRef<str>>(head: impl IntoIterator<Item = S>) -> Table {
        let head: Vec<S> = head.into_iter().collect();
        let mut table = Table { text: String::new() };
        table.row(&head);
        table.text.push('|');
        table.text.push_str(&"---|".repeat(head.len()));
        table.text.push('\n');
        table
    }

    /// One row; an empty cell stays empty.
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.text.push('|');
        for cell in cells {
            let cell = cell.as_ref();
            if cell.is_empty() {
                self.text.push_str(" |");
            } else {
                self.text.push(' ');
                self.text.push_str(&cell_text(cell));
                self.text.push_str(" |");
            }
        }
        self.text.push('\n');
    }

    /// The table's Markdown, each line ending in a newline.
    pub fn finish(self) -> String {
        self.text
    }
}

/// Text fit for one cell: `|` escaped and line breaks made spaces.
pub fn cell_text(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_rule_rows_and_escaping() {
        let mut t = Table::new(["runtime", "req/s"]);
        t.row(["rust", "1,000"]);
        t.row(["bun", "VOID: a | b\nlog tail"]);
        t.row(["node", ""]);
        assert_eq!(
            t.finish(),
            "| runtime | req/s |\n|---|---|\n| rust | 1,000 |\n| bun | VOID: a \\| b log tail |\n| node | |\n"
        );
    }
}
