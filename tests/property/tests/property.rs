//! The property test proper; see the crate documentation. Each test uses its own database, so
//! they run in parallel.

use eventtime_property::{backfill, config, scenario, seed, worked_example};

#[test]
fn keyed_hourly_with_null_keys_and_event_ids() {
    scenario::run(&config::keyed_hourly(), seed());
}

#[test]
fn unkeyed_quarter_hour_without_lateness() {
    scenario::run(&config::unkeyed_quarter_hour(), seed());
}

#[test]
fn quoted_names_daily_with_origin() {
    scenario::run(&config::quoted_daily(), seed());
}

#[test]
fn spec_worked_example() {
    worked_example::run(seed());
}

#[test]
fn backfill_equals_live() {
    backfill::run(seed());
}
