//! The one integration test binary. `support` holds the fixtures, the Docker
//! test harness and the fault-injection proxy; each other module is one area.

mod support;

mod cli_docker;
mod docker_engine;
mod faults;
mod planner;
mod properties;
mod races;
mod state_files;
