//! babeld's local-interface lines (what `braid route` reads) on arbitrary bytes: the parser
//! never panics, every error is one line, and whatever parses applies to the state table;
//! a neighbour line that parses names a single-word interface.
#![no_main]

use braid_io::babel::{Line, Table, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut table = Table::default();
    for line in text.split('\n') {
        match parse(line) {
            Ok(l) => {
                table.apply(&l);
                if let Line::Neighbour(_, n) = &l {
                    assert!(table.neighbours.len() <= text.len());
                    assert!(n.ifname.split_ascii_whitespace().count() == 1);
                }
            }
            Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
        }
    }
});
