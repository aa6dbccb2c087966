//! Storage facade tests, each run on local disk and on the S3 test server.

use std::io::{Read, Write};

use pipeline::Error;
use pipeline::storage::{Location, Storage};

use crate::proxy::{Faults, Proxy};
use crate::s3env::{self, backends};

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| rng.u8(..)).collect()
}

#[test]
fn round_trip() {
    let (_dir, backends) = backends("round-trip");
    for (storage, root) in backends {
        let loc = root.join("a/b/hello.txt");
        assert!(!storage.exists(&loc).expect("exists"), "{loc}");
        storage.put(&loc, b"hello world").expect("put");
        assert_eq!(storage.read(&loc).expect("read"), b"hello world", "{loc}");
        let meta = storage.head(&loc).expect("head").expect("object exists");
        assert_eq!(meta.size, 11);
        assert!(meta.etag.is_some());

        let mut w = storage
            .create(&root.join("a/streamed.bin"))
            .expect("create");
        for chunk in data(300_000, 1).chunks(7_000) {
            w.write_all(chunk).expect("write");
        }
        assert_eq!(w.finish().expect("finish"), 300_000);
        let mut back = Vec::new();
        storage
            .open(&root.join("a/streamed.bin"))
            .expect("open")
            .read_to_end(&mut back)
            .expect("read");
        assert_eq!(back, data(300_000, 1), "{root}");

        let mut tail = Vec::new();
        storage
            .open_from(&root.join("a/streamed.bin"), 299_990)
            .expect("open_from")
            .read_to_end(&mut tail)
            .expect("read");
        assert_eq!(tail, data(300_000, 1)[299_990..]);

        storage.put(&root.join("empty"), b"").expect("put empty");
        assert_eq!(storage.read(&root.join("empty")).expect("read empty"), b"");

        // A note (written without waiting for a local disk) is whole, and a rewrite
        // replaces it, as a heartbeat rewrites a start note.
        let note = root.join("a/note.json");
        storage.put_note(&note, b"{\"beat\":1}").expect("put note");
        storage
            .put_note(&note, b"{\"beat\":2}")
            .expect("rewrite note");
        assert_eq!(storage.read(&note).expect("read note"), b"{\"beat\":2}");
        if let Location::Local(dir) = root.join("a") {
            let names: Vec<String> = std::fs::read_dir(&dir)
                .expect("read_dir")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                names.iter().all(|n| !n.ends_with(".tmp")),
                "a note left a temporary: {names:?}"
            );
        }

        let listed: Vec<String> = storage
            .list(&root)
            .expect("list")
            .into_iter()
            .map(|m| m.relative)
            .collect();
        assert_eq!(
            listed,
            ["a/b/hello.txt", "a/note.json", "a/streamed.bin", "empty"],
            "{root}"
        );
        let single = storage.list(&loc).expect("list one object");
        assert_eq!(single.len(), 1);

        storage.delete(&loc).expect("delete");
        storage.delete(&loc).expect("deleting twice is fine");
        assert!(!storage.exists(&loc).expect("exists"));
        match storage.read(&loc) {
            Err(e) => assert!(
                e.to_string().contains("hello.txt"),
                "error names the object: {e}"
            ),
            Ok(_) => panic!("reading a deleted object succeeded"),
        }
    }
}

#[test]
fn ranged_reads() {
    let (_dir, backends) = backends("ranges");
    let bytes = data(1 << 20, 2);
    for (storage, root) in backends {
        let loc = root.join("blob");
        storage.put(&loc, &bytes).expect("put");
        for (offset, len) in [
            (0u64, 1u64),
            (0, 1 << 20),
            (1000, 5000),
            ((1 << 20) - 3, 3),
            ((1 << 20) - 3, 100),
        ] {
            let got = storage.read_range(&loc, offset, len).expect("range");
            let end = (offset + len).min(bytes.len() as u64) as usize;
            assert_eq!(
                &got[..],
                &bytes[offset as usize..end],
                "{root} {offset}+{len}"
            );
        }
        assert!(
            storage
                .read_range(&loc, 5, 0)
                .expect("empty range")
                .is_empty()
        );
    }
}

#[test]
fn multipart_50_mib() {
    let (_dir, backends) = backends("multipart");
    let bytes = data(50 << 20, 3);
    for (storage, root) in backends {
        let loc = root.join("big/object.bin");
        let mut w = storage.create(&loc).expect("create");
        for chunk in bytes.chunks(1 << 20) {
            w.write_all(chunk).expect("write");
        }
        assert!(
            !storage.exists(&loc).expect("exists"),
            "{loc} visible before finish"
        );
        w.finish().expect("finish");
        let meta = storage.head(&loc).expect("head").expect("exists");
        assert_eq!(meta.size, bytes.len() as u64);
        if root.is_s3() {
            let etag = meta.etag.unwrap_or_default();
            assert!(etag.contains("-10"), "a 10-part multipart ETag, got {etag}");
        }
        assert!(storage.read(&loc).expect("read") == bytes, "{loc} differs");
    }
}

#[test]
fn listing_2500_keys() {
    let (_dir, backends) = backends("listing");
    for (storage, root) in backends {
        let names: Vec<String> = (0..2500)
            .map(|i| format!("k/{:05}.txt", (i * 7919) % 2500))
            .collect();
        std::thread::scope(|s| {
            for part in names.chunks(313) {
                let (storage, root) = (&storage, &root);
                s.spawn(move || {
                    for n in part {
                        storage.put(&root.join(n), n.as_bytes()).expect("put");
                    }
                });
            }
        });
        let listed = storage.list(&root.join("k")).expect("list");
        assert_eq!(listed.len(), 2500, "{root}");
        let rel: Vec<&str> = listed.iter().map(|m| m.relative.as_str()).collect();
        let mut sorted = rel.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(rel, sorted, "sorted and unique");
        assert_eq!(rel[0], "00000.txt");
        assert_eq!(rel[2499], "02499.txt");
        assert!(listed.iter().all(|m| m.size == 11));
    }
}

#[test]
fn unfinished_writer_leaves_nothing() {
    let (_dir, backends) = backends("abort");
    for (storage, root) in backends {
        let loc = root.join("half/written.bin");
        {
            let mut w = storage.create(&loc).expect("create");
            w.write_all(&data(12 << 20, 4)).expect("write");
        }
        assert!(!storage.exists(&loc).expect("exists"), "{loc} left behind");
        assert!(
            storage.list(&root.join("half")).expect("list").is_empty(),
            "{root}"
        );
        if let Some(dir) = loc.as_path().and_then(|p| p.parent()) {
            let leftovers = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
            assert_eq!(leftovers, 0, "temporary files left in {}", dir.display());
        }
    }
}

#[test]
fn aborted_upload_is_aborted_on_the_server() {
    let Some(endpoint) = s3env::endpoint() else {
        return;
    };
    let proxy = Proxy::start(
        s3env::port(&endpoint),
        Faults {
            slow_down: 0.0,
            drop: 0.0,
            cut_body: 0.0,
            slow_body: 0.0,
        },
        1,
    );
    let (storage, root) = s3env::bucket(&proxy.endpoint(), "abort-server");
    {
        let mut w = storage.create(&root.join("x.bin")).expect("create");
        w.write_all(&data(11 << 20, 5)).expect("write");
    }
    let lines = proxy.counts.lines.lock().expect("lines").clone();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("POST ") && l.contains("uploads")),
        "upload started: {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("DELETE ") && l.contains("uploadId=")),
        "upload aborted: {lines:?}"
    );
    assert!(!storage.exists(&root.join("x.bin")).expect("exists"));
}

#[test]
fn transient_faults_are_retried() {
    let Some(endpoint) = s3env::endpoint() else {
        return;
    };
    let faults = Faults {
        slow_down: 0.15,
        drop: 0.1,
        cut_body: 0.15,
        slow_body: 0.05,
    };
    let proxy = Proxy::start(s3env::port(&endpoint), faults, 42);
    let (storage, root) = s3env::bucket(&proxy.endpoint(), "faults");
    let big = data(23 << 20, 6);
    let mut w = storage.create(&root.join("big.bin")).expect("create");
    w.write_all(&big).expect("write");
    w.finish().expect("finish despite faults");
    let mut back = Vec::new();
    storage
        .open(&root.join("big.bin"))
        .expect("open")
        .read_to_end(&mut back)
        .expect("streaming read despite faults");
    assert!(back == big, "streamed bytes differ");
    for i in 0..200 {
        storage
            .put(&root.join(&format!("small/{i:03}")), b"x")
            .expect("put despite faults");
    }
    assert_eq!(
        storage
            .list(&root.join("small"))
            .expect("list despite faults")
            .len(),
        200
    );
    for i in 0..50u64 {
        let got = storage
            .read_range(&root.join("big.bin"), i * 4096, 100_000)
            .expect("range despite faults");
        assert!(got[..] == big[(i * 4096) as usize..(i * 4096 + 100_000) as usize]);
    }
    let (slow, dropped, cut) = proxy.injected();
    eprintln!("faults injected: {slow} SlowDown, {dropped} dropped connections, {cut} cut bodies");
    assert!(
        slow >= 10 && dropped >= 5 && cut >= 3,
        "too few faults: {slow} {dropped} {cut}"
    );
}

#[test]
fn retries_are_bounded_and_errors_name_the_object() {
    let Some(endpoint) = s3env::endpoint() else {
        return;
    };
    let proxy = Proxy::start(
        s3env::port(&endpoint),
        Faults {
            slow_down: 1.0,
            drop: 0.0,
            cut_body: 0.0,
            slow_body: 0.0,
        },
        3,
    );
    let storage = Storage::with_options(s3env::options(&proxy.endpoint()));
    let loc = Location::parse("s3://no-bucket/some/key.parquet").expect("valid");
    let err = storage.read(&loc).expect_err("every request fails");
    let msg = err.to_string();
    assert!(msg.contains("s3://no-bucket/some/key.parquet"), "{msg}");
    assert!(msg.contains("gave up after 10 attempts"), "{msg}");
    assert_eq!(
        proxy
            .counts
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        10
    );

    // A permanent error is not retried.
    let (storage, root) = s3env::bucket(&endpoint, "permanent");
    let missing = root.join("missing.bin");
    match storage.read(&missing) {
        Err(Error::S3 { url, .. }) | Err(Error::NotFound { url }) => {
            assert_eq!(url, missing.to_string())
        }
        other => panic!("expected a not-found error, got {other:?}"),
    }
}

#[test]
fn writes_in_flight_keep_order_and_stop_at_the_first_error() {
    use pipeline::storage::{IN_FLIGHT, each_in_flight};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    let items: Vec<usize> = (0..100).collect();
    let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let doubled = each_in_flight(&items, |&i| {
        let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(at_once, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        now.fetch_sub(1, Ordering::SeqCst);
        Ok(i * 2)
    })
    .expect("all succeed");
    assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
    let most = most.load(Ordering::SeqCst);
    assert!((2..=IN_FLIGHT).contains(&most), "{most} at once");

    // Items 10 and 20 fail: the error is item 10's, and the hand-out stops.
    let started = AtomicUsize::new(0);
    let err = each_in_flight(&items, |&i| {
        started.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        if i == 10 || i == 20 {
            Err(Error::Usage(format!("item {i} failed")))
        } else {
            Ok(i)
        }
    })
    .expect_err("an item fails");
    assert!(err.to_string().contains("item 10 failed"), "{err}");
    assert!(started.load(Ordering::SeqCst) < items.len());
}
