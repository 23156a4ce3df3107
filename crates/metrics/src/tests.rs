use super::*;

fn end(exit_code: i32) -> Ending {
    Ending {
        exit_code,
        ended_at: 1_700_000_000.5,
        duration: Duration::from_millis(1500),
    }
}

#[test]
fn a_shard_travels_base64url_encoded() {
    assert_eq!(
        group_path("progress", None),
        "/metrics/job/landing/product/progress"
    );
    let shard = Shard::new(0, 4).unwrap();
    // base64("0/4") = "MC80"; the URL-safe alphabet, no padding.
    assert_eq!(
        group_path("progress", Some(shard)),
        "/metrics/job/landing/product/progress/shard@base64/MC80"
    );
    let shard = Shard::new(12, 100).unwrap();
    let path = group_path("progress", Some(shard));
    let b64 = path.rsplit('/').next().unwrap();
    assert!(!b64.contains(['+', '/', '=']), "{b64}");
}

/// The run group names every outcome (zeros included, so a PUT leaves no stale
/// count) and nothing but fixed sets and bounded input names as labels.
#[test]
fn the_run_group_has_every_outcome_and_escapes_input_names() {
    let mut n = Night::default();
    for _ in 0..3 {
        n.outcomes.add(Action::Published);
    }
    n.attention
        .insert("we\"ird\\name.jsonl".into(), Action::Refused);
    n.stages.insert("stream", 0.25);
    let text = run_group(&n, &end(65));
    for a in OUTCOMES {
        let count = if a == Action::Published { 3 } else { 0 };
        let line = format!("landing_run_inputs{{outcome=\"{}\"}} {count}", a.as_str());
        assert!(text.contains(&line), "{line} missing:\n{text}");
    }
    assert!(text.contains("landing_run_exit_code 65"), "{text}");
    assert!(
        text.contains("landing_run_stage_seconds{stage=\"stream\"} 0.25"),
        "{text}"
    );
    assert!(
        text.contains(r#"landing_input_outcome{input="we\"ird\\name.jsonl",outcome="refused"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("landing_run_end_timestamp_seconds 1700000000.5"),
        "{text}"
    );
    assert!(
        !text.contains("# EOF"),
        "text format 0.0.4, not OpenMetrics"
    );
    assert!(!text.contains("last_success"), "marks are their own group");
}

#[test]
fn marks_are_pushed_only_for_a_success_or_a_publish() {
    let mut n = Night::default();
    assert_eq!(marks_group(&n, &end(1)), None);
    assert_eq!(marks_group(&n, &end(75)), None);
    let ok = marks_group(&n, &end(0)).unwrap();
    assert!(
        ok.contains("landing_last_success_timestamp_seconds 1700000000.5"),
        "{ok}"
    );
    assert!(!ok.contains("landing_last_publish"), "{ok}");
    n.outcomes.add(Action::Published);
    let refused_too = marks_group(&n, &end(65)).unwrap();
    assert!(
        refused_too.contains("landing_last_publish_timestamp_seconds"),
        "{refused_too}"
    );
    assert!(
        !refused_too.contains("landing_last_success"),
        "{refused_too}"
    );
}

#[test]
fn the_marks_carry_the_nights_latest_log_entry() {
    let mut n = Night::default();
    n.outcomes.add(Action::Published);
    n.log_sequence = Some(43);
    let marks = marks_group(&n, &end(0)).unwrap();
    assert!(marks.contains("\nlanding_log_sequence 43.0\n"), "{marks}");
    // A night that published nothing leaves the last number where it was: the POST
    // of the marks carries no such series.
    let quiet = marks_group(&Night::default(), &end(0)).unwrap();
    assert!(!quiet.contains("landing_log_sequence"), "{quiet}");
}
