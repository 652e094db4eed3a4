//! Fuzzes the PMU back end's perf.data reader (`observe::perfmem::read`) and the conversion of
//! what it read into the sharing model: any input must give a result or an error, never a
//! panic, an out-of-bounds read or an allocation sized by an unchecked length.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mem) = observe::perfmem::read(data) {
        for p in observe::perfmem::to_sharing(&mem, 64, "fuzz") {
            let _ = p.validate();
        }
    }
});
