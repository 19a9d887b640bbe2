//! The op conformance table on the native backend, and a check that it covers every
//! primitive (and every elementwise function).

mod common;

use strata_runtime::backend::native::NativeBackend;
use strata_runtime::ir::{BinaryOp, OpKind, UnaryOp};

#[test]
fn every_op_matches_hand_computed_values() {
    let failures = common::run_all(&NativeBackend::new(), &common::cases());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_table_covers_every_primitive() {
    let cases = common::cases();
    let used: Vec<OpKind> = cases.iter().flat_map(common::kinds_used).collect();
    let missing: Vec<&OpKind> = OpKind::ALL.iter().filter(|k| !used.contains(k)).collect();
    assert!(missing.is_empty(), "no forward test uses {missing:?}");
    for op in UnaryOp::ALL {
        assert!(
            cases
                .iter()
                .any(|c| c.name.starts_with(&format!("{} ", op.name()))),
            "no case for {op:?}"
        );
    }
    for op in BinaryOp::ALL {
        assert!(
            cases
                .iter()
                .any(|c| c.name.starts_with(&format!("{} ", op.name()))),
            "no case for {op:?}"
        );
    }
}

/// The loop cases fail when an expected value is wrong: the loops really ran to the end.
#[test]
fn while_cases_fail_on_a_wrong_expected_value() {
    let failures = common::run_all(&NativeBackend::new(), &common::wrong_while_cases());
    let want = common::wrong_while_cases()
        .iter()
        .map(|c| c.expected.len())
        .sum::<usize>();
    assert_eq!(failures.len(), want, "{}", failures.join("\n"));
}
