//! (m) memory (SPEC §6, *memory is bounded*): one `COPY` of `m_rows` events with `m_keys`
//! distinct keys, each into a fresh backend, whose peak resident memory (`VmHWM` of
//! `/proc/<pid>/status`: private memory and the pages of shared buffers it touched) is read when
//! the statement is done. Three sides: the table alone (its peak is mostly shared buffers), a
//! pipeline without event ids (the ingest engine, which writes its groups whenever they reach
//! its bound) and one with event ids (the SQL statement, whose grouping spills past `work_mem`).
//! The run fails when a pipeline's backend peaks at 512 MB or more (SPEC §6), or when the
//! benchmark cannot read the backend's memory (the server must run on this machine).

use std::time::{Duration, Instant};

use crate::{connect, copy_in, exec, num, reset_with, scalar, Res, Sizes, CREATE_PIPELINE, DB};
use crate::{CREATE_PIPELINE_NO_IDS, SOURCE_ID_INDEX};

/// The bound of SPEC §6, in kB.
pub(crate) const BOUND_KB: u64 = 512 * 1024;

pub(crate) struct Peak {
    pub(crate) side: &'static str,
    pub(crate) kb: u64,
    pub(crate) time: Duration,
}

/// `VmHWM` of process `pid`, in kB.
fn peak_kb(pid: i32) -> Res<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| {
        format!("(m): cannot read /proc/{pid}/status (the server must run on this machine): {e}")
    })?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("(m): no VmHWM in /proc/{pid}/status"))
}

/// The events of (m): ids in order, `keys` distinct keys each twice or more, one day.
fn data(s: &Sizes) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::with_capacity(s.m_rows * 48);
    for i in 0..s.m_rows {
        let k = (i as u64 * 7_919) % s.m_keys;
        writeln!(
            out,
            "{}\t{k}\t{}.{:02}\t2026-02-01 {:02}:{:02}:{:02}+00",
            i + 1,
            i % 1000,
            i % 100,
            (i / 3600) % 24,
            (i / 60) % 60,
            i % 60
        )
        .unwrap();
    }
    out
}

pub(crate) fn workload_m(s: &Sizes) -> Res<Vec<Peak>> {
    println!(
        "(m) memory: COPY of {} events with {} distinct keys, each side in a fresh backend",
        num(s.m_rows),
        num(s.m_keys as usize)
    );
    let data = data(s);
    let mut out = Vec::new();
    for (side, create, index) in [
        ("the table alone", None, false),
        (
            "pipeline without event ids",
            Some(CREATE_PIPELINE_NO_IDS),
            false,
        ),
        ("pipeline with event ids", Some(CREATE_PIPELINE), false),
        (
            "pipeline with event ids, the source's unique index its ledger",
            Some(CREATE_PIPELINE),
            true,
        ),
    ] {
        let mut c = connect(DB)?;
        reset_with(&mut c, None)?;
        if index {
            exec(&mut c, SOURCE_ID_INDEX)?;
        }
        if let Some(create) = create {
            exec(&mut c, create)?;
        }
        drop(c);
        // A backend that has done nothing else: its peak is the COPY's.
        let mut c = connect(DB)?;
        let pid = scalar(&mut c, "SELECT pg_backend_pid()::bigint")? as i32;
        let started = Instant::now();
        copy_in(&mut c, &data)?;
        let time = started.elapsed();
        let kb = peak_kb(pid)?;
        println!(
            "  (m) {side}: peak {} MB in {:.1} s",
            kb / 1024,
            time.as_secs_f64()
        );
        out.push(Peak { side, kb, time });
    }
    Ok(out)
}
