#!/usr/bin/perl
# SPDX-License-Identifier: Apache-2.0
#
# structure.pl - the layers of src/ never loop, and no file or function
# grows past its limit (TAP, run by make check and make check-loaded).
#   - every #include "DIR/..." in src/ names its own folder or one below it
#     (the order is @LAYERS);
#   - every call between the objects of src/ (what one object's undefined
#     symbols find defined in another, by nm: the linker's own view, not a
#     guess from the text) goes to its own folder or one below;
#   - no two files call each other, in any number of steps (a circle:
#     the calls between a file's functions and those of files that call
#     it back, inside one folder too);
#   - the daemon's objects take from the library's only what its version
#     script exports and what the utility archive (libflutil.a: src/kernel
#     and src/util) defines;
#   - no file of src/ or tools/ passes 800 lines, and no function of src/,
#     tools/ or tests/ passes 120 (kernel style: "{" and "}" at column 0).
# tests/structure.allow lists what is known and not yet fixed, each entry
# with its size today: an entry may not grow, and one no longer needed
# fails too, so the list only shrinks.
#
# usage: perl tests/structure.pl (from the repository root; BUILD=DIR for
# another build directory, after make)

use strict;
use warnings;

# Bottom up, one folder a floor: two folders that called each other would
# be a circle the file-by-file check cannot see.
my @LAYERS = ('kernel', 'util', 'format', 'store', 'source', 'send',
	      'author', 'engine', 'daemon');
my %rank;
$rank{$LAYERS[$_]} = $_ for 0 .. $#LAYERS;
my $FILE_MAX = 800;
my $FUNC_MAX = 120;
my $BUILD = $ENV{BUILD} // 'build';
my $ALLOW = 'tests/structure.allow';

my $n = 0;
my $fails = 0;

sub ok {
	my ($good, $what, @diag) = @_;
	$n++;
	print $good ? "ok $n - $what\n" : "not ok $n - $what\n";
	print "#   $_\n" for @diag[0 .. ($#diag > 29 ? 29 : $#diag)];
	print "#   ... and " . (@diag - 30) . " more\n" if @diag > 30;
	$fails++ unless $good;
}

# The layer folder of a path under src/, or undef.
sub layer {
	my ($path) = @_;
	return $path =~ m{^src/([^/]+)/} && exists $rank{$1} ? $1 : undef;
}

sub lines_of {
	my ($f) = @_;
	open(my $fh, '<', $f) or die "$f: $!";
	my @l = <$fh>;
	return @l;
}

# ---- what is allowed for now ------------------------------------------------

my %allow;	# "kind key" -> limit (0: none)
my %used;
open(my $af, '<', $ALLOW) or die "$ALLOW: $!";
while (<$af>) {
	next if /^\s*(#|$)/;
	chomp;
	my ($kind, $key, $limit) = /^(\S+)\s+(\S+(?: -> \S+)?)\s*(\d*)$/
		or die "$ALLOW:$.: not 'KIND KEY [LIMIT]': $_";
	$allow{"$kind $key"} = $limit || 0;
}
close $af;

# A violation: 1 if it counts (not allowed, or past its allowed size).
sub counts {
	my ($kind, $key, $size) = @_;
	my $k = "$kind $key";

	return 1 unless exists $allow{$k};
	$used{$k} = 1;
	return $allow{$k} && $size > $allow{$k} ? 1 : 0;
}

my @src = sort grep { layer($_) } split /\n/, `find src -name '*.[ch]'`;

# ---- includes ---------------------------------------------------------------

my @bad;
for my $f (@src) {
	my $own = layer($f);
	my $i = 0;
	for (lines_of($f)) {
		$i++;
		my ($to) = m{^\s*#\s*include\s+"([a-z_]+)/} or next;
		next unless exists $rank{$to} && $rank{$to} > $rank{$own};
		push @bad, "$f:$i includes $to/ (above $own/)"
			if counts('up', "$f -> $to", 0);
	}
}
ok(!@bad, "src/: no #include names a layer above its own (" .
   join(' < ', @LAYERS) . ")", @bad);

# ---- calls, by the objects' symbols -----------------------------------------

my (%defs, %undefs, %edges);
my @objs = grep { -f "$BUILD/$_" } map { (my $o = $_) =~ s/\.c$/.o/; $o }
	   grep { /\.c$/ } @src;
my @csrc = grep { /\.c$/ } @src;
ok(@objs == @csrc, "every object of src/ is built (" . scalar(@objs) .
   " of " . scalar(@csrc) . " in $BUILD/src: run make first)");
for my $o (@objs) {
	(my $c = $o) =~ s/\.o$/.c/;
	for (`nm --defined-only -g "$BUILD/$o"`) {
		my ($sym) = /^\S*\s+[A-Z]\s+(\S+)$/ or next;
		$defs{$sym} = $c;
	}
	for (`nm -u "$BUILD/$o"`) {
		my ($sym) = /^\s+U\s+(\S+)$/ or next;
		push @{ $undefs{$c} }, $sym;
	}
}
@bad = ();
for my $c (sort keys %undefs) {
	my %to;
	for my $sym (@{ $undefs{$c} }) {
		my $d = $defs{$sym};
		next unless $d && $d ne $c;
		push @{ $to{$d} }, $sym;
	}
	for my $d (sort keys %to) {
		my ($a, $b) = (layer($c), layer($d));
		my @syms = @{ $to{$d} };
		my $what = "$c -> $d: " . join(', ', @syms[0 .. ($#syms > 3 ? 3 : $#syms)]);
		if ($rank{$b} > $rank{$a}) {
			push @bad, "$what (above $a/)"
				if counts('up', "$c -> $b", 0);
			next if exists $allow{"up $c -> $b"};
		}
		$edges{$c}{$d} = 1;
	}
}
ok(!@bad, "src/: no object calls into a layer above its own", @bad);

# Tarjan's strongly connected components of the call graph (the allowed
# calls up left out): every component of more than one file is a circle.
my (%index, %low, %on, @stack, @circles);
my $next = 0;
sub visit {
	my ($v) = @_;
	$index{$v} = $low{$v} = $next++;
	push @stack, $v;
	$on{$v} = 1;
	for my $w (sort keys %{ $edges{$v} || {} }) {
		if (!exists $index{$w}) {
			visit($w);
			$low{$v} = $low{$w} if $low{$w} < $low{$v};
		} elsif ($on{$w}) {
			$low{$v} = $index{$w} if $index{$w} < $low{$v};
		}
	}
	return unless $low{$v} == $index{$v};
	my @c;
	my $w;
	do {
		$w = pop @stack;
		$on{$w} = 0;
		push @c, $w;
	} while ($w ne $v);
	my $key = join('+', sort @c);
	push @circles, join(' ', sort @c)
		if @c > 1 && counts('circle', $key, 0);
}
visit($_) for grep { !exists $index{$_} } sort keys %undefs;
ok(!@circles, "src/: no files call each other (no circle)",
   map { "circle: $_" } @circles);

# ---- the daemon on the public API -------------------------------------------

# What the daemon's objects take from the library's: only what
# src/libfaultline.map exports, or what libflutil.a (src/kernel, src/util)
# defines.
my %exported;
open(my $mf, '<', 'src/libfaultline.map') or die "src/libfaultline.map: $!";
while (<$mf>) {
	$exported{$1} = 1 if /^\s+(fl_\w+);/;
}
close $mf;
my %util;
for (`nm --defined-only -g "$BUILD/libflutil.a" 2>/dev/null`) {
	$util{$1} = 1 if /^\S*\s+[A-Z]\s+(\S+)$/;
}
ok(scalar(keys %util) > 0, "$BUILD/libflutil.a is built (run make first)");
@bad = ();
for my $c (sort grep { layer($_) eq 'daemon' } keys %undefs) {
	for my $sym (sort @{ $undefs{$c} }) {
		my $d = $defs{$sym};
		next unless $d && layer($d) ne 'daemon';
		next if $exported{$sym} || $util{$sym};
		push @bad, "$c takes $sym from $d"
			if counts('internal', "$c -> $sym", 0);
	}
}
ok(!@bad, "src/daemon/ takes from the library only its API " .
   "(src/libfaultline.map) and libflutil.a", @bad);

# ---- sizes ------------------------------------------------------------------

@bad = ();
for my $f (sort split /\n/, `find src tools -name '*.[ch]'`) {
	my $l = () = lines_of($f);
	push @bad, "$f: $l lines"
		if $l > $FILE_MAX && counts('file', $f, $l);
}
ok(!@bad, "no file of src/ or tools/ over $FILE_MAX lines", @bad);

@bad = ();
for my $f (sort split /\n/, `find src tools tests testlib -name '*.c'`) {
	my ($name, $start) = ('?', 0);
	my $i = 0;
	for (lines_of($f)) {
		$i++;
		if (!$start && /^[A-Za-z_].*?\b(\w+)\s*\(/) {
			$name = $1;
		} elsif (!$start && /^\{/) {
			$start = $i;
		} elsif ($start && /^\}/) {
			my $len = $i - $start + 1;
			push @bad, "$f: $name: $len lines"
				if $len > $FUNC_MAX &&
				   counts('function', "$f:$name", $len);
			$start = 0;
		}
	}
}
ok(!@bad, "no function of src/, tools/ or tests/ over $FUNC_MAX lines", @bad);

my @stale = grep { !$used{$_} } sort keys %allow;
ok(!@stale, "$ALLOW: every entry still needed (take fixed ones out)",
   @stale);

print "1..$n\n";
exit($fails ? 1 : 0);
