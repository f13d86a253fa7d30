set terminal pngcairo size 1300,480 font "sans,10"
set datafile missing '?'
reset
set output '/work/main/bench/results/dev3/allreduce_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "allreduce, 2 ranks"
plot '/work/main/bench/results/dev3/allreduce_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/dev3/allreduce_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/dev3/allreduce_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allreduce, 2 ranks"
plot '/work/main/bench/results/dev3/allreduce_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/dev3/allreduce_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/dev3/allreduce_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
reset
set output '/work/main/bench/results/dev3/sendrecv_n2.png'
set multiplot layout 1,2
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "time per op (us, slowest rank)"
set title "sendrecv, 2 ranks"
plot '/work/main/bench/results/dev3/sendrecv_n2_chorus.dat' using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/dev3/sendrecv_n2_ompi.dat' using 1:2 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/dev3/sendrecv_n2_gloo.dat' using 1:2 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "sendrecv, 2 ranks"
plot '/work/main/bench/results/dev3/sendrecv_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/dev3/sendrecv_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/dev3/sendrecv_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
set terminal pngcairo size 1500,380 font "sans,9"
reset
set output '/work/main/bench/results/dev3/overview_n2.png'
set multiplot layout 1,3 title "busbw vs size, 2 ranks"
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "allreduce, 2 ranks"
plot '/work/main/bench/results/dev3/allreduce_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/dev3/allreduce_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/dev3/allreduce_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
set logscale x 2
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768)
set format y "%g"
set grid
set key top left opaque box
set xlabel "size (bytes)"
set logscale y
set ylabel "bus bandwidth (GB/s)"
set title "sendrecv, 2 ranks"
plot '/work/main/bench/results/dev3/sendrecv_n2_chorus.dat' using 1:3 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#d62728" title 'Chorus', \
     '/work/main/bench/results/dev3/sendrecv_n2_ompi.dat' using 1:3 with linespoints lw 2 pt 5 ps 0.7 lc rgb "#1f77b4" title 'OMPI', \
     '/work/main/bench/results/dev3/sendrecv_n2_gloo.dat' using 1:3 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" title 'Gloo'
unset multiplot
set output
set terminal pngcairo size 1300,480 font "sans,10"
