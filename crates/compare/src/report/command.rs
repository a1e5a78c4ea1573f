//! `compare report`: records re-rendered into the Markdown, SVGs and HTML page, the summary on stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::reference;
use crate::report::{Options, html_path, print, write_outputs};

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Record files written by compare (one JSON record per line).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where to write the Markdown, ending in `.md` (the SVGs and the HTML page go next to it); default: the
    /// first file with `.md`. Never one of the record files.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The runtime every ratio, overview, chart and verdict is taken against (`node`: every runtime against
    /// Node).
    #[arg(long, default_value = reference::DEFAULT)]
    pub reference: String,
    /// The ledger of published claims judged in the "Published claims" section [default: bench/claims.toml
    /// when it exists].
    #[arg(long)]
    pub claims: Option<PathBuf>,
}

/// `compare report`: the records re-rendered, the summary on stdout; 1 when a file cannot be read or written.
pub fn command(args: &ReportArgs) -> ExitCode {
    let rerender = || -> anyhow::Result<PathBuf> {
        let md = markdown_path(args)?;
        let records = crate::records::read_jsonl(&args.files)?;
        let claims = match &args.claims {
            Some(path) => crate::ledger::read(path)?,
            None => Options::with_ledger_at(Path::new(crate::ledger::DEFAULT_PATH))?.claims,
        };
        let opts = Options { reference: args.reference.clone(), claims };
        print(&write_outputs(&records, &md, &opts)?);
        Ok(md)
    };
    match rerender() {
        Ok(md) => {
            eprintln!("compare: wrote {} and {}", md.display(), html_path(&md).display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("compare: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Where `compare report` writes its Markdown: `--out`, or the first record file with `.md`. It must end in
/// `.md`, since the HTML page goes beside it with `.html` (an `--out X.html` would be overwritten by its own
/// page), and neither may be one of the record files being read.
fn markdown_path(args: &ReportArgs) -> anyhow::Result<PathBuf> {
    let md = args.out.clone().unwrap_or_else(|| args.files[0].with_extension("md"));
    if md.extension().is_none_or(|e| e != "md") {
        anyhow::bail!(
            "--out {}: name the Markdown file, ending in .md (the HTML page is written beside it as .html)",
            md.display()
        );
    }
    let same = |a: &Path, b: &Path| a == b || a.canonicalize().ok().is_some_and(|a| b.canonicalize().ok() == Some(a));
    for outputs in [md.clone(), html_path(&md)] {
        if let Some(input) = args.files.iter().find(|f| same(f, &outputs)) {
            anyhow::bail!("{} is a record file being read: give --out a different name", input.display());
        }
    }
    Ok(md)
}
