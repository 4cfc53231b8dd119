pub mod proto;
pub mod wire;
