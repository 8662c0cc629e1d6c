//! The property test proper; see the crate documentation. Each test uses its own database, so
//! they run in parallel.

use eventtime_property::{
    backfill, batched, batched_sessions, config, db, scenario, seed, sessions, state_bound,
    worked_example,
};

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
    backfill::run(&backfill::hourly(), seed());
}

#[test]
fn backfill_equals_live_hopping() {
    backfill::run(&backfill::hopping(), seed());
}

#[test]
fn backfill_equals_live_calendar_hopping() {
    backfill::run(&backfill::calendar_hopping(), seed());
}

#[test]
fn backfill_equals_live_sessions() {
    backfill::run(&backfill::sessions(), seed());
}

#[test]
fn batched_late_firings_equal_per_statement() {
    batched::run(&batched::tumbling(), seed());
}

#[test]
fn batched_late_firings_equal_per_statement_hopping() {
    batched::run(&batched::hopping(), seed());
}

#[test]
fn batched_late_firings_equal_per_statement_cumulate() {
    batched::run(&batched::cumulate(), seed());
}

#[test]
fn batched_sessions_equal_per_statement() {
    batched_sessions::run(&batched_sessions::half_hour_gap(), seed());
}

#[test]
fn hopping_fixed_three_hours_every_hour() {
    scenario::run(&config::hopping_3h(), seed());
}

#[test]
fn calendar_monthly_in_utc() {
    scenario::run(&config::calendar_monthly(), seed());
}

#[test]
fn calendar_hopping_three_months_every_month() {
    scenario::run(&config::calendar_hopping(), seed());
}

#[test]
fn cumulate_a_day_by_four_hours() {
    scenario::run(&config::cumulate_daily(), seed());
}

#[test]
fn sessions_per_user_with_null_users_and_event_ids() {
    sessions::run(&config::sessions_per_user(), seed());
}

#[test]
fn sessions_unkeyed_with_a_gap_of_a_day() {
    sessions::run(&config::sessions_unkeyed_daily(), seed());
}

#[test]
fn state_rows_are_bounded_by_windows_and_writers() {
    state_bound::run(seed());
}

#[test]
fn any_aggregate_over_every_argument_type_in_hopping_windows() {
    scenario::run(&config::matrix_hopping(), seed());
}

#[test]
fn any_aggregate_over_every_argument_type_in_sessions() {
    sessions::run(&config::matrix_sessions(), seed());
}

/// hll and tdigest are packaged for PostgreSQL 15 only (setup installs them there); on another
/// major this test says it did not run.
#[test]
fn hll_and_tdigest_on_postgresql_15() {
    if db::server_major() != 15 {
        println!(
            "hll_and_tdigest_on_postgresql_15: not run on PostgreSQL {} (no hll and tdigest packages)",
            db::server_major()
        );
        return;
    }
    scenario::run(&config::sketches(), seed());
}
