//! Feeds arbitrary bytes to the event-stream reader: it must return an error or a stream whose
//! records can all be iterated, never panic, hang or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(stream) = trace::Stream::parse(data) {
        let mut n = 0u64;
        for r in stream.events() {
            n += 1;
            let _ = stream.string(r.obj);
            let _ = stream.site_address(r.site);
        }
        assert_eq!(n, stream.events);
        assert_eq!(stream.counts.values().sum::<u64>(), stream.events);
    }
    let _ = trace::meta::Meta::from_json(&String::from_utf8_lossy(data));
});
