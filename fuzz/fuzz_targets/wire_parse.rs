//! The wire parser on arbitrary bytes: never panics, and whatever parses re-encodes to the same
//! bytes (decode → encode is the identity).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((header, frames)) = braid_core::wire::parse(data) {
        let mut out = Vec::new();
        braid_core::wire::emit(&header, &frames, &mut out);
        assert_eq!(out, data);
    }
});
