# ftrace enables exactly the call sites its filter names, through small and large updates.
run ftrace-sites "$here/ftrace-sites.sh"
