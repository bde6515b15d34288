//! The view commands: `millpond view list|read` and `millpond subscribe`.
