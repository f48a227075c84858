//! `braid sim`'s scenario loader (TOML, every variant checked) on arbitrary text: it never
//! panics, and its error is one line naming the file. Seed the corpus with `scenarios/*.toml`
//! (README, Tests) so that mutations reach past the TOML syntax into the keys' checks.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Trace and signal paths resolve against a directory that does not exist: a file naming
    // one gets the loader's "cannot read" error rather than reading this machine's files.
    if let Err(e) = braid_sim::scenario::load_str(text, "fuzz.toml", Path::new("/nonexistent"), &[])
    {
        let e = e.to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.starts_with("fuzz.toml: "), "{e}");
    }
});
