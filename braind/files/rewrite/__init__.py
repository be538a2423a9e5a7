"""Rewrites and appends that never lose what another process writes to the same file meanwhile.

braind changes MEMORY.md and logfiles while people edit them, and no filesystem offers a rename
"only if the file is still the one I read". A rewrite is therefore a compare-and-exchange made
of what Linux does offer (the caller holds the daemon's write lock):

1. Wait while the file is in flux: changed within the watcher's quiet window and now empty or
   smaller than braind last saw it (an editor's truncate-then-write caught half way).
2. Open the file and read it through a descriptor that stays open; compute the new text.
3. Write the new text to a temp file of a unique name and fsync it.
4. Compare: the name still leads to the inode that was read, and it holds the bytes read. What
   it gained at its end meanwhile (an append) is carried into the temp file; any other change
   starts the rewrite over on the new text.
5. Hard-link the old inode beside the backup, then swap the temp file and the file with one
   `renameat2(RENAME_EXCHANGE)`, and look at what came out. A file another program renamed in
   just before (vim's save) comes out instead of the one read: what it adds to the bytes
   compared is appended to the new version (unless a save made since, from that file, already
   holds it); any other change of it is swapped back in and the rewrite redone on it.
6. Look at the old inode once more through the kept descriptor. A write that reached it in the
   last moment comes from a program holding it open (an appender, an in-place save): it is
   swapped back in and the rewrite redone, and what reached braind's version meanwhile goes
   into the next one; a save made from braind's version, read in that moment, already holds
   the change, which is then not made twice, but drops the lines the old inode gained late:
   those are read as it goes back and carried again if a save drops them. Otherwise the old
   inode becomes the `.bak` and stays watched.

Bytes that reach a version no longer in place are never appended in place (the program that
wrote them may be truncating the file right now): they go into the next version braind swaps
in, at the next write to the file, after the request's index update, or when the daemon stops,
and are journaled in `<name>.carry` until then. Carried bytes that a save from an older read
drops again within a few seconds are carried again; bytes a version already holds are never
added twice, and what a version gained is never told against a file caught half way through
a save in place.

Attempts are bounded; a file that never holds still gets `busy`, with nothing changed. A pure
append (new text = old text + more) is one `O_APPEND` write instead, checked afterwards to have
landed right after the bytes read. A file with git conflict markers, or with a hard link braind
did not make, is refused rather than rewritten. Where the filesystem cannot exchange names, the
temp file is renamed over the file after the compare (a window of microseconds remains there).
"""
