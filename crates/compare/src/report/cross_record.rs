//! The rules that judge one record by another (a cached run whose hit ratio is far from rust's is void),
//! applied before anything reads the records, so a re-render of an old file, a verdict and a claim judge it
//! the same way. Its own module so the summary, `compare verdict` and `compare claims` share it without
//! importing each other.

use crate::records::Record;

/// The records as every page reads them, with the cross-record rules applied.
pub fn judged(records: &[Record]) -> Vec<Record> {
    crate::report::cache::void_mismatched(records)
}
