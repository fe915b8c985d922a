//! stub
pub(crate) fn open(lua: &mlua::Lua) -> mlua::Result<mlua::Table> {
    lua.create_table()
}
