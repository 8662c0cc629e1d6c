//! The pure core: window assignment, the landing rule, the pipeline clock from its sources, the
//! aggregate list, the pipeline definition (`model`) and the SQL each pipeline runs. Nothing here touches PostgreSQL, so all of it is tested with plain `#[test]`.

pub mod aggregates;
pub mod clock;
pub mod ident;
pub mod landing;
pub mod model;
pub mod sealed;
pub mod sqlgen;
pub mod time;
pub mod window;
