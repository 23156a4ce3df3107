use super::*;

fn summary(action: Action, accepted: u64, rejected: u64, duplicate: u64) -> Summary {
    Summary {
        accepted_rows: accepted,
        rejected_rows: rejected,
        duplicate_rows: duplicate,
        ..Summary::new("r".into(), "progress".into(), "i".into(), action)
    }
}

fn measured(stage: &'static str, secs: f64, waits: u64) -> Measured {
    Measured {
        stages: vec![(stage, secs)],
        bytes_in: 10,
        bytes_out: 7,
        lease_waits: waits,
    }
}

#[test]
fn only_http_urls_without_credentials_are_accepted() {
    let gw = Pushgateway::new("http://pg.monitoring.svc:9091/", 5).unwrap();
    assert_eq!(gw.url, "http://pg.monitoring.svc:9091");
    assert_eq!(gw.timeout, Duration::from_secs(5));
    assert!(Pushgateway::new("https://pg.example/prefix", 1).is_ok());
    for bad in [
        "pg:9091",
        "ftp://pg/",
        "http://user:secret@pg:9091",
        "http://pg:9091/?x=1",
        "http://pg:9091/#top",
        "not a url",
    ] {
        let e = Pushgateway::new(bad, 5).expect_err(bad);
        assert!(matches!(e, Error::Config(_)), "{bad}: {e}");
        assert!(!e.to_string().contains("secret") || bad.contains("secret"));
    }
    assert!(Pushgateway::new("http://pg:9091", 0).is_err());
}

/// Rows count only published inputs; stages, bytes and waits add up; only inputs
/// that need a human are named.
#[test]
fn the_recorder_sums_what_its_inputs_measured() {
    let r = Recorder::default();
    let published = summary(Action::Published, 5, 1, 2);
    let skipped = summary(Action::Skipped, 100, 100, 100);
    r.landed(
        "a",
        Action::Published,
        Some(&published),
        &measured("stream", 1.5, 0),
    );
    r.landed(
        "b",
        Action::Skipped,
        Some(&skipped),
        &measured("stream", 0.5, 1),
    );
    r.landed("c", Action::Busy, None, &measured("lease", 2.0, 1));
    r.landed("d", Action::Refused, None, &Measured::default());
    let mut totals = Outcomes::default();
    for a in [Action::Published, Action::Skipped, Action::Busy] {
        totals.add(a);
    }
    r.outcomes(totals);
    let n = r.night();
    assert_eq!(n.rows, [5, 1, 2]);
    assert_eq!((n.bytes_in, n.bytes_out, n.lease_waits), (30, 21, 2));
    assert_eq!(n.stages["stream"], 2.0);
    assert_eq!(n.stages["lease"], 2.0);
    assert_eq!(
        n.attention.into_iter().collect::<Vec<_>>(),
        vec![("c".into(), Action::Busy), ("d".into(), Action::Refused)]
    );
    let counts = OUTCOMES.map(|a| n.outcomes.get(a));
    assert_eq!(counts, [1, 1, 0, 1, 0, 0, 0, 0]);
    r.count(Action::Failed);
    assert_eq!(r.night().outcomes.get(Action::Failed), 1);
}

/// The night's log entry is the highest a publish or the log's repair wrote; a skip
/// names the entry it found and wrote none, so it moves nothing.
#[test]
fn the_recorder_keeps_the_highest_log_entry_a_publish_wrote() {
    let rec = Recorder::default();
    let m = measured("stage", 1.0, 0);
    let published = |n| Summary {
        log_sequence: Some(n),
        ..summary(Action::Published, 1, 0, 0)
    };
    rec.landed("a", Action::Published, Some(&published(41)), &m);
    rec.landed("b", Action::Published, Some(&published(43)), &m);
    let skipped = Summary {
        log_sequence: Some(99),
        ..summary(Action::Skipped, 1, 0, 0)
    };
    rec.landed("c", Action::Skipped, Some(&skipped), &m);
    assert_eq!(rec.night().log_sequence, Some(43));
    // An entry the log's repair wrote after them counts, a lower one does not.
    let repaired = |sequence| crate::summary::Repairs {
        repaired: vec![crate::summary::Repaired {
            input_name: "d".into(),
            sequence,
            run_id: "r".into(),
        }],
        pending: vec![],
    };
    rec.repaired(&repaired(40));
    assert_eq!(rec.night().log_sequence, Some(43));
    rec.repaired(&repaired(44));
    assert_eq!(rec.night().log_sequence, Some(44));
    assert_eq!(Recorder::default().night().log_sequence, None);
}
