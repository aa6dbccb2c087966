//! Every input the fuzzer found and that was fixed (`fixtures/fuzz/<target>/`) keeps
//! its contract; and the harness itself catches what it must catch.

use std::time::Duration;

#[global_allocator]
static ALLOC: fuzz::Counting = fuzz::Counting;

#[test]
fn found_inputs_keep_their_contract() {
    let root = fuzz::targets::fixtures().join("fuzz");
    let mut replayed = 0;
    for t in fuzz::targets() {
        let Ok(dir) = std::fs::read_dir(root.join(t.name)) else {
            continue;
        };
        for entry in dir.flatten() {
            let input = std::fs::read(entry.path()).expect("read a found input");
            let (outcome, _, _) = fuzz::check(&t, &input);
            assert!(outcome.is_ok(), "{}: {outcome:?}", entry.path().display());
            replayed += 1;
        }
    }
    fuzz::targets::remove_scratch();
    eprintln!("{replayed} found inputs replayed");
}

#[test]
fn every_target_has_seeds_that_parse() {
    for t in fuzz::targets() {
        let seeds = (t.seeds)();
        assert!(!seeds.is_empty(), "{}: no seeds", t.name);
        for s in &seeds {
            let (outcome, _, _) = fuzz::check(&t, s);
            assert!(
                outcome.is_ok(),
                "{}: a seed breaks the contract: {outcome:?}",
                t.name
            );
        }
    }
    fuzz::targets::remove_scratch();
}

#[test]
fn the_harness_catches_panics_memory_and_time() {
    let base = fuzz::targets().remove(0);
    let panics = fuzz::Target {
        run: |_| panic!("boom"),
        ..base
    };
    assert!(
        fuzz::check(&panics, b"x")
            .0
            .is_err_and(|e| e.contains("boom"))
    );
    let base = fuzz::targets().remove(0);
    let hungry = fuzz::Target {
        run: |_| Ok(format!("{}", vec![1u8; 200 << 20].len())),
        memory_cap: 100 << 20,
        ..base
    };
    assert!(
        fuzz::check(&hungry, b"x")
            .0
            .is_err_and(|e| e.starts_with("memory"))
    );
    let base = fuzz::targets().remove(0);
    let slow = fuzz::Target {
        run: |_| {
            std::thread::sleep(Duration::from_millis(50));
            Ok("slept".into())
        },
        time_bound: Duration::from_millis(1),
        ..base
    };
    assert!(
        fuzz::check(&slow, b"x")
            .0
            .is_err_and(|e| e.starts_with("time"))
    );
}

#[test]
fn the_mutator_changes_inputs_within_the_length_cap() {
    let mut m = fuzz::Mutator::new(7, 1000);
    let seeds = vec![b"WARC/1.0\r\nContent-Length: 3\r\n\r\nabc".to_vec()];
    let made: Vec<Vec<u8>> = (0..200).map(|_| m.input(&seeds, &[b"<p>"])).collect();
    assert!(made.iter().all(|i| i.len() <= 1000));
    assert!(made.iter().filter(|i| **i != seeds[0]).count() > 150);
}
