set terminal pngcairo size 1300,480 font "sans,10"
set datafile missing '?'
reset
set output '/work/main/bench/results/2026-11-21_1701/allreduce_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "allreduce, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allreduce_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allreduce, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allreduce_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/allgather_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "allgather, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allgather_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allgather, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allgather_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/reducescatter_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "reducescatter, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reducescatter, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/broadcast_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "broadcast, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/broadcast_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "broadcast, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/broadcast_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/alltoall_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "alltoall, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/alltoall_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "alltoall, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/alltoall_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/reduce_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "reduce, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reduce_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reduce, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reduce_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/gather_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "gather, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/gather_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/gather_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/gather_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "gather, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/gather_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/gather_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/gather_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/scatter_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "scatter, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/scatter_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "scatter, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/scatter_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/sendrecv_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "sendrecv, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "sendrecv, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
set terminal pngcairo size 1500,1140 font "sans,9"
reset
set output '/work/main/bench/results/2026-11-21_1701/overview_n2.png'
set multiplot layout 3,3 title "busbw vs size, 2 ranks"
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allreduce, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allreduce_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allgather, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allgather_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reducescatter, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "broadcast, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/broadcast_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "alltoall, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/alltoall_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reduce, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reduce_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "gather, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/gather_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/gather_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/gather_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "scatter, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/scatter_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "sendrecv, 2 ranks"
plot '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
set terminal pngcairo size 1300,480 font "sans,10"
reset
set output '/work/main/bench/results/2026-11-21_1701/allreduce_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "allreduce, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allreduce_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allreduce, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allreduce_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/allgather_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "allgather, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allgather_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allgather, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allgather_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/reducescatter_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "reducescatter, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reducescatter, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/broadcast_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "broadcast, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/broadcast_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "broadcast, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/broadcast_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/alltoall_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "alltoall, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/alltoall_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "alltoall, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/alltoall_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/reduce_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "reduce, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reduce_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reduce, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reduce_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/gather_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "gather, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/gather_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/gather_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/gather_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "gather, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/gather_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/gather_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/gather_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/scatter_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "scatter, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/scatter_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "scatter, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/scatter_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/2026-11-21_1701/sendrecv_n4.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "sendrecv, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "sendrecv, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
set terminal pngcairo size 1500,1140 font "sans,9"
reset
set output '/work/main/bench/results/2026-11-21_1701/overview_n4.png'
set multiplot layout 3,3 title "busbw vs size, 4 ranks"
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allreduce, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allreduce_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allreduce_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allgather, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/allgather_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/allgather_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reducescatter, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reducescatter_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "broadcast, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/broadcast_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/broadcast_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "alltoall, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/alltoall_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/alltoall_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "reduce, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/reduce_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/reduce_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "gather, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/gather_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/gather_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/gather_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "scatter, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/scatter_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/scatter_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "128M" 134217728)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "sendrecv, 4 ranks"
plot '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/2026-11-21_1701/sendrecv_n4_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
set terminal pngcairo size 1300,480 font "sans,10"
